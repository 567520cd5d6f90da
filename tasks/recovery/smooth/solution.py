"""Recover a smooth signal from noisy samples with spikes (seed: a narrow moving average)."""

WINDOW = 3  # samples averaged around each point
PASSES = 1  # times the average is applied


def smooth(signal):
    """The denoised signal: one value per sample."""
    out = list(signal)
    half = WINDOW // 2
    for _ in range(PASSES):
        out = [sum(out[max(i - half, 0) : i + half + 1]) / len(out[max(i - half, 0) : i + half + 1])
               for i in range(len(out))]
    return out
