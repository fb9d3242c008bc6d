"""Two builds measured in turn, the order swapped every round (A B, B A, ...),
so that the machine's drift falls on both alike."""


def interleaved(builds, rounds, measure, show=None):
    """{build: [measure(build) for each round]}; show(build, result) after each."""
    res = {b: [] for b in builds}
    for r in range(rounds):
        for b in (builds if r % 2 == 0 else builds[::-1]):
            res[b].append(measure(b))
            if show:
                show(b, res[b][-1])
    return res
