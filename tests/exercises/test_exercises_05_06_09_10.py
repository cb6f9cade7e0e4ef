"""The exercises of lessons 05, 06, 09 and 10: typical mistakes get their hint (solutions passing and stubs
failing: test_exercises_framework_runs.py)."""
import pytest

import gpuedu
from gpuedu import exercises

gpuedu.setup(verbose=False)

IDS = ["05.relu_backward", "05.bias_grad", "05.sgd_step", "06.xent_grad", "09.sgd_momentum", "10.gather_rows"]

# A plausible wrong answer for each exercise and the words its hint must contain.
MISTAKES = {
    "05.relu_backward": ("int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dx[i] = dy[i];",
                         "derivative is 0"),
    "05.bias_grad": ("int j = blockIdx.x * blockDim.x + threadIdx.x; if (j >= cols) return; float s = 0;"
                     "for (int c = 0; c < cols && j < rows; ++c) s += dz[j * cols + c]; db[j] = s;",
                     "sums of rows"),
    "05.sgd_step": ("int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) w[i] += lr * g[i];",
                    "descent subtracts"),
    "06.xent_grad": ("int b = blockIdx.x * blockDim.x + threadIdx.x; if (b >= rows) return; float s = 0;"
                     "for (int j = 0; j < classes; ++j) s += expf(logits[b*classes+j]);"
                     "for (int j = 0; j < classes; ++j) dlogits[b*classes+j] = (expf(logits[b*classes+j]) / s"
                     " - (j == labels[b] ? 1.0f : 0.0f)) / rows;",
                     "Subtract the row's maximum"),
    "09.sgd_momentum": ("int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) w[i] -= lr * (mu * v[i] + g[i]);",
                        "store the new velocity"),
    "10.gather_rows": ("int f = blockIdx.x * blockDim.x + threadIdx.x; int r = blockIdx.y * blockDim.y + threadIdx.y;"
                       "if (r < rows && f < features) out[r * features + f] = x[r * features + f];",
                       "read row index[r]"),
}


def with_body(exercise_id, body):
    stub = exercises.stub(exercise_id)
    start = stub.index("// FILL ME IN")
    end = stub.index("\n", start)
    return stub[:start] + body + stub[end:]


@pytest.mark.parametrize("exercise_id", IDS)
def test_typical_mistake_gets_its_hint(exercise_id, capsys):
    body, hint = MISTAKES[exercise_id]
    result = exercises.check(exercise_id, with_body(exercise_id, body))
    out = capsys.readouterr().out
    assert not result
    assert hint in out, out
