"""Conv2D, MaxPool2D, Flatten and Reshape against the float64 reference, alone and in a Sequential CNN."""
import numpy as np
import pytest

import gpuedu
from gpuedu import nn
from gpuedu.nn import reference as ref

backend = gpuedu.setup(verbose=False)
ga = backend.gpuarray


def images(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def small_cnn(version=4, stride=1, padding=1):
    return nn.Sequential(
        nn.Conv2D(2, 3, 3, stride=stride, padding=padding, seed=1, activation="relu", version=version),
        nn.MaxPool2D(2),
        nn.Conv2D(3, 4, (3, 2), padding=1, seed=2, activation="relu", version=version),
        nn.Flatten(),
        nn.Dense(4 * 4 * 6 if stride == 1 else 4 * 2 * 4, 5, seed=3),
    )


def device_grads(model, x, y):
    loss = nn.SoftmaxCrossEntropy()
    model.backward(loss(model.forward(x), y))
    return loss.result()[0], [p.grad.get() for p in model.parameters()]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
@pytest.mark.parametrize("stride,batch", [(1, 1), (1, 3), (2, 2)])
def test_cnn_gradients_match_the_reference_and_finite_differences(version, stride, batch):
    x = images((batch, 2, 9, 11))
    labels = np.random.default_rng(9).integers(0, 5, batch).astype(np.int32)
    model = small_cnn(version, stride)
    net = ref.Sequential.from_model(model)
    x64 = x.astype(np.float64)
    ref_loss, ref_grads = net.loss_and_grads(x64, labels)
    ref_grads = [g.copy() for g in ref_grads]
    if version == 4 and batch == 1:   # the reference against float64 finite differences (once is enough)
        for param, grad in zip(net.parameters(), ref_grads):
            numeric = ref.numerical_gradient(lambda: net.loss(x64, labels), param)
            assert ref.relative_error(grad, numeric) < 1e-4
    loss, grads = device_grads(model, x, labels)
    assert abs(loss - ref_loss) < 1e-4 * max(1.0, abs(ref_loss))
    for got, want in zip(grads, ref_grads):
        assert ref.relative_error(got, want) < 1e-4


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1)])
def test_conv2d_layer_forward_and_input_gradient(stride, padding):
    layer = nn.Conv2D(3, 4, 3, stride=stride, padding=padding, seed=0)
    x = ga.to_gpu(images((2, 3, 10, 7)))
    y = layer.forward(x)
    r = ref.Conv2D(layer.W.numpy(), layer.b.numpy(), stride, padding)
    np.testing.assert_allclose(y.get(), r.forward(x.get().astype(np.float64)), atol=1e-4)
    dy = images(tuple(y.shape), seed=1)
    dx = layer.backward(ga.to_gpu(dy)).get()
    np.testing.assert_allclose(dx, r.backward(dy.astype(np.float64)), atol=1e-4)
    np.testing.assert_allclose(layer.W.grad.get(), r.dW, atol=1e-3)
    assert layer.backward(ga.to_gpu(dy), need_input_grad=False) is None


def test_he_initialisation_and_parameters():
    layer = nn.Conv2D(8, 32, 3, seed=0)
    w = layer.W.numpy()
    assert w.shape == (32, 8, 3, 3) and layer.b.shape == (32,)
    assert abs(w.std() - np.sqrt(2 / 72)) < 0.01
    assert np.array_equal(w, nn.Conv2D(8, 32, 3, seed=0).W.numpy())
    assert layer.parameters() == [layer.W, layer.b]


def test_reshape_lets_a_cnn_take_flat_rows():
    model = nn.Sequential(nn.Reshape(1, 8, 8), nn.Conv2D(1, 2, 3, padding=1, activation="relu"), nn.MaxPool2D(2),
                          nn.Flatten(), nn.Dense(32, 3))
    assert model.in_features == 64
    x = images((4, 64))
    logits = model.forward(x).get()
    net = ref.Sequential.from_model(model)
    np.testing.assert_allclose(logits, net.forward(x.astype(np.float64)), atol=1e-4)
    assert model.predict(x).shape == (4,)


def test_sequential_takes_images_for_a_model_that_starts_with_a_convolution():
    model = small_cnn()
    assert model.takes_images and model.in_features is None and model.in_channels == 2
    logits = model.forward(images((2, 2, 9, 11)))
    assert tuple(logits.shape) == (2, 5)
    with pytest.raises(ValueError, match="4-D"):
        model.forward(images((2, 198)))


@pytest.mark.parametrize("layers,match", [
    (lambda: [nn.Conv2D(1, 4, 3), nn.Conv2D(3, 2, 3)], "takes 3 channels but"),
    (lambda: [nn.Conv2D(1, 4, 3), nn.MaxPool2D(2), nn.Conv2D(5, 2, 3)], "takes 5 channels but"),
    (lambda: [nn.Dense(4, 4), nn.Conv2D(1, 2, 3)], "Flatten"),
    (lambda: [nn.Reshape(2, 3, 3), nn.Conv2D(1, 2, 3)], "takes 1 channels but"),
])
def test_sequential_rejects_stacks_that_do_not_chain(layers, match):
    with pytest.raises(ValueError, match=match):
        nn.Sequential(*layers())


def test_dense_chains_are_still_checked():
    with pytest.raises(ValueError, match="takes 5 features"):
        nn.Sequential(nn.Dense(3, 4), nn.Dense(5, 2))


@pytest.mark.parametrize("make,x,match", [
    (lambda: nn.Conv2D(3, 4, 3), images((2, 1, 8, 8)), "has 1 channels, the layer expects 3"),
    (lambda: nn.Conv2D(1, 4, 5), images((2, 1, 3, 3)), "does not fit"),
    (lambda: nn.Conv2D(1, 4, 3), images((2, 8, 8)), "4-D"),
    (lambda: nn.MaxPool2D(4), images((1, 1, 3, 3)), "does not fit"),
    (lambda: nn.Reshape(1, 4, 4), images((2, 15)), "rows of 16 features"),
])
def test_layers_reject_bad_input(make, x, match):
    with pytest.raises(ValueError, match=match):
        make().forward(ga.to_gpu(x))


@pytest.mark.parametrize("kwargs,match", [
    (dict(in_channels=0, out_channels=1, kernel_size=3), "in_channels"),
    (dict(in_channels=1, out_channels=1, kernel_size=3, padding=-1), "padding"),
    (dict(in_channels=1, out_channels=1, kernel_size=3, activation="tanh"), "fuses only a ReLU"),
    (dict(in_channels=1, out_channels=1, kernel_size=(3, 3, 3)), "pair"),
])
def test_conv2d_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        nn.Conv2D(**kwargs)


def test_backward_before_forward_is_an_error():
    for layer in (nn.Conv2D(1, 1, 3), nn.MaxPool2D(2), nn.Flatten(), nn.Reshape(1, 2, 2)):
        with pytest.raises(RuntimeError, match="forward"):
            layer.backward(ga.zeros((1, 1, 2, 2), np.float32))


def test_layers_launch_on_their_stream_and_agree_with_the_default_stream():
    x = images((2, 2, 9, 11))
    labels = np.array([1, 3], np.int32)
    results = []
    for stream in (None, backend.driver.Stream()):
        model = small_cnn(version=2)
        model.stream = stream
        results.append(device_grads(model, x, labels))
        if stream is not None:
            stream.synchronize()
    (loss0, grads0), (loss1, grads1) = results
    assert loss0 == loss1
    for a, b in zip(grads0, grads1):
        np.testing.assert_array_equal(a, b)


def test_reshape_after_a_dense_layer_lets_image_layers_follow():
    model = nn.Sequential(nn.Dense(6, 16, seed=0), nn.Reshape(1, 4, 4), nn.Conv2D(1, 2, 3, padding=1), nn.Flatten(),
                          nn.Dense(32, 3, seed=1))
    x = images((2, 6))
    np.testing.assert_allclose(model.forward(x).get(), ref.Sequential.from_model(model).forward(x.astype(np.float64)),
                               atol=1e-4)
