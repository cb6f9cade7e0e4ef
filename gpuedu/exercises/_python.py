"""What the exercises answered in Python (a function, or a program on MPI ranks) share: their id and stub
rules, their lesson, and how ``show`` prints them."""


class PythonExercise:
    """Mixed into the dataclasses ``FunctionExercise`` and ``ProgramExercise``; ``answer`` names what the
    learner writes ("function", "program") in ``show``."""

    answer = "code"

    def __post_init__(self):
        from ._exercise import _ID
        if not _ID.match(self.id):
            raise ValueError(f"exercise id {self.id!r} must look like '12.ring_allreduce' (two-digit lesson, dot, "
                             f"lower-case name)")
        if "FILL ME IN" not in self.stub:
            raise ValueError(f"{self.id}: the stub must mark where the learner writes with '# FILL ME IN'")

    @property
    def lesson(self):
        return self.id[:2]

    def show(self):
        print(f"{self.id}: {self.title}\n")
        print(self.text.strip() + "\n")
        print("How it is checked: " + self.launch + "\n")
        print(f"Your {self.answer} (replace the FILL ME IN line):\n" +
              "\n".join("    " + l if l else l for l in self.stub.strip("\n").splitlines()))
