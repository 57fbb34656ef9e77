"""One-dimensional (temporal) convolutions: a PyTorch-style NCW conv stack, a WaveNet-like
stack of dilated causal convolutions with gated activations, residual and skip connections, a
strided audio-frontend encoder and a depthwise-separable temporal conv net."""

import jax
import jax.numpy as jnp
import numpy as np

_NWC = ("NWC", "WIO", "NWC")
_NCW = ("NCW", "OIW", "NCW")


def _conv1d(x, w, stride=1, dilation=1, padding="SAME", groups=1, dims=_NWC):
    return jax.lax.conv_general_dilated(
        x, w, window_strides=(stride,), padding=padding, rhs_dilation=(dilation,),
        dimension_numbers=dims, feature_group_count=groups,
    )


def _w(rng, k, cin, cout, gain=2.0):
    """WIO weights scaled by fan_in = k * cin."""
    w = rng.standard_normal((k, cin, cout), dtype=np.float32)
    return w * np.float32(np.sqrt(gain / (k * cin)))


def _zeros(n):
    return np.zeros((n,), np.float32)


def _layer_norm(x, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps)


def conv1d_temporal(x, w1, b1, w2, b2, w3, b3, w4, b4, wf, bf):
    """Four kernel-5 convs in NCW/OIW layout on [8, 40, 512] feature sequences (40 -> 64 ->
    64 -> 128 -> 128 channels), ReLU, a 2x temporal max pool by reshape after the second,
    per-frame logits from an einsum over channels to [b, t, 32]."""
    h = x
    for i, (w, b) in enumerate(((w1, b1), (w2, b2), (w3, b3), (w4, b4))):
        h = jax.nn.relu(_conv1d(h, w, dims=_NCW) + b[None, :, None])
        if i == 1:
            n, c, t = h.shape
            h = jnp.max(h.reshape(n, c, t // 2, 2), axis=-1)
    return jnp.einsum("nct,ck->ntk", h, wf) + bf


def conv1d_temporal_inputs():
    rng = np.random.default_rng(1001)
    x = rng.standard_normal((8, 40, 512), dtype=np.float32)
    params = []
    for cin, cout in ((40, 64), (64, 64), (64, 128), (128, 128)):
        params.extend((_w(rng, 5, cin, cout).transpose(2, 1, 0).copy(), _zeros(cout)))
    wf = rng.standard_normal((128, 32), dtype=np.float32) * np.float32(1 / np.sqrt(128))
    return (x, *params, wf, _zeros(32))


def conv1d_wavenet(x, w_in, b_in, wfg, bfg, wrs, brs, wo1, bo1, wo2, bo2):
    """WaveNet-like: a 1x1 input conv, six gated residual layers of kernel-2 causal convs with
    dilations 1..32 (left padding; filter and gate from one conv), one 1x1 conv giving the
    residual and skip outputs, then a 1x1 output head over 256 classes. Per-layer weights are
    stacked on a leading axis; [4, 1024, 1] audio."""
    res = w_in.shape[-1]
    h = _conv1d(x, w_in) + b_in
    skips = 0.0
    for i in range(wfg.shape[0]):
        d = 2 ** i
        fg = _conv1d(h, wfg[i], dilation=d, padding=((d, 0),)) + bfg[i]
        z = jnp.tanh(fg[..., :res]) * jax.nn.sigmoid(fg[..., res:])
        rs = _conv1d(z, wrs[i]) + brs[i]
        h = (h + rs[..., :res]) * np.float32(np.sqrt(0.5))
        skips = skips + rs[..., res:]
    out = jax.nn.relu(_conv1d(jax.nn.relu(skips), wo1) + bo1)
    return jax.nn.log_softmax(_conv1d(out, wo2) + bo2, axis=-1)


def conv1d_wavenet_inputs():
    rng = np.random.default_rng(1002)
    layers, res, skip = 6, 32, 64
    x = np.tanh(rng.standard_normal((4, 1024, 1), dtype=np.float32))
    wfg = np.stack([_w(rng, 2, res, 2 * res, 1.0) for _ in range(layers)])
    wrs = np.stack([
        np.concatenate([_w(rng, 1, res, res, 1.0), _w(rng, 1, res, skip, 1.0 / layers)], -1)
        for _ in range(layers)
    ])
    return (x, _w(rng, 1, 1, res, 1.0), _zeros(res), wfg, np.zeros((layers, 2 * res), np.float32),
            wrs, np.zeros((layers, res + skip), np.float32), _w(rng, 1, skip, 128), _zeros(128),
            _w(rng, 1, 128, 256, 1.0), _zeros(256))


def conv1d_strided(wave, w1, b1, w2, b2, w3, b3, w4, b4, w5, b5, wp, bp):
    """Audio-frontend encoder (wav2vec-like): raw [4, 16000, 1] audio through strided convs
    (kernel 10 stride 5, then kernel 3/2 stride 2, 64 -> 128 channels), GELU and layer norm,
    frames reshaped into [b, t / 4, 4 * c] chunks and projected."""
    h = jax.nn.gelu(_layer_norm(_conv1d(wave, w1, stride=5, padding="VALID") + b1))
    for w, b in ((w2, b2), (w3, b3), (w4, b4), (w5, b5)):
        h = jax.nn.gelu(_layer_norm(_conv1d(h, w, stride=2, padding="VALID") + b))
    n, t, c = h.shape
    t4 = t // 4
    h = h[:, : t4 * 4].reshape(n, t4, 4 * c)
    return h @ wp + bp


def conv1d_strided_inputs():
    rng = np.random.default_rng(1003)
    wave = rng.standard_normal((4, 16000, 1), dtype=np.float32) * np.float32(0.3)
    params = [_w(rng, 10, 1, 64), _zeros(64)]
    for k, cin, cout in ((3, 64, 64), (3, 64, 128), (3, 128, 128), (2, 128, 128)):
        params.extend((_w(rng, k, cin, cout), _zeros(cout)))
    wp = rng.standard_normal((512, 256), dtype=np.float32) * np.float32(1 / np.sqrt(512))
    return (wave, *params, wp, _zeros(256))


def conv1d_separable(x, w_in, dw1, pw1, b1, dw2, pw2, b2, dw3, pw3, b3, dw4, pw4, b4, wh, bh):
    """Temporal conv net of depthwise-separable residual blocks (QuartzNet-like): a 1x1 input
    conv, then four blocks of a kernel-9 depthwise conv (feature_group_count = channels, growing
    dilation) and a 1x1 pointwise conv with residual; [2, 256, 80] -> 128 ch -> 30 logits."""
    h = _conv1d(x, w_in)
    blocks = ((dw1, pw1, b1), (dw2, pw2, b2), (dw3, pw3, b3), (dw4, pw4, b4))
    for i, (dw, pw, b) in enumerate(blocks):
        r = _conv1d(h, dw, dilation=2 ** i, groups=h.shape[-1])
        r = _conv1d(r, pw) + b
        h = h + jax.nn.relu(_layer_norm(r))
    return _conv1d(h, wh) + bh


def conv1d_separable_inputs():
    rng = np.random.default_rng(1004)
    c = 128
    x = rng.standard_normal((2, 256, 80), dtype=np.float32)
    params = [_w(rng, 1, 80, c, 1.0)]
    for _ in range(4):
        params.extend((_w(rng, 9, 1, c, 1.0), _w(rng, 1, c, c, 1.0), _zeros(c)))
    return (x, *params, _w(rng, 1, c, 30, 1.0), _zeros(30))
