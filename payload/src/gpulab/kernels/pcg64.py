"""numpy's PCG64 in plain Python: its seeding (`seeded`: np.random.PCG64(seed)'s state and
increment, without importing numpy.random, which cost a cold run 8 ms of its record phase on
this project's 2-core host) and its jump-ahead (`advance`), for the device's random inputs
(gpulab.kernels.generate).

np.random.PCG64(seed) hashes the seed with SeedSequence (numpy/random/bit_generator.pyx:
the entropy's 32-bit words mixed into a pool of four, then four 64-bit words drawn from the
pool), takes the first two words as the 128-bit seed and the last two as the stream, and
seeds as pcg_setseq_128_srandom_r does (state 0, increment 2 stream + 1, one step, add the
seed, one step). tests/kernels/test_kernels_generate.py compares both with numpy's.
"""

from __future__ import annotations

MULTIPLIER = (0x2360ED051FC65DA4 << 64) | 0x4385DF649FCCF645
"""PCG64's LCG multiplier (numpy's PCG_DEFAULT_MULTIPLIER_128)."""
_MASK128 = (1 << 128) - 1

_MASK32 = 0xFFFFFFFF
_POOL_SIZE = 4
_INIT_A = 0x43B0D7E5
_MULT_A = 0x931E8875
_INIT_B = 0x8B51F9DD
_MULT_B = 0x58F38DED
_MIX_MULT_L = 0xCA01F9DD
_MIX_MULT_R = 0x4973F715
_XSHIFT = 16


class _Hash:
    """SeedSequence's hashmix, whose constant advances with every value hashed."""

    def __init__(self) -> None:
        self.constant = _INIT_A

    def __call__(self, value: int) -> int:
        value ^= self.constant
        self.constant = self.constant * _MULT_A & _MASK32
        value = value * self.constant & _MASK32
        return value ^ (value >> _XSHIFT)


def _mix(x: int, y: int) -> int:
    result = (_MIX_MULT_L * x - _MIX_MULT_R * y) & _MASK32
    return result ^ (result >> _XSHIFT)


def _words(seed: int) -> list[int]:
    """The seed's 32-bit words, least significant first ([0] for 0)."""
    words = []
    while True:
        words.append(seed & _MASK32)
        seed >>= 32
        if not seed:
            return words


def _pool(seed: int) -> list[int]:
    entropy = _words(seed)
    hashmix = _Hash()
    pool = [hashmix(entropy[i] if i < len(entropy) else 0) for i in range(_POOL_SIZE)]
    for source in range(_POOL_SIZE):
        for target in range(_POOL_SIZE):
            if source != target:
                pool[target] = _mix(pool[target], hashmix(pool[source]))
    for word in entropy[_POOL_SIZE:]:
        for target in range(_POOL_SIZE):
            pool[target] = _mix(pool[target], hashmix(word))
    return pool


def generate_state(seed: int, words: int) -> list[int]:
    """SeedSequence(seed).generate_state(words, np.uint64), as ints."""
    if seed < 0:
        raise ValueError(f"a seed is a non-negative integer, not {seed}")
    pool = _pool(seed)
    constant = _INIT_B
    halves = []
    for index in range(2 * words):
        value = pool[index % _POOL_SIZE] ^ constant
        constant = constant * _MULT_B & _MASK32
        value = value * constant & _MASK32
        halves.append(value ^ (value >> _XSHIFT))
    return [halves[2 * i] | halves[2 * i + 1] << 32 for i in range(words)]


def seeded(seed: int) -> tuple[int, int]:
    """np.random.PCG64(seed).state["state"]'s ("state", "inc")."""
    seed_high, seed_low, stream_high, stream_low = generate_state(seed, 4)
    increment = ((stream_high << 64 | stream_low) << 1 | 1) & _MASK128
    state = increment  # one step from 0
    state = (state + (seed_high << 64 | seed_low)) & _MASK128
    return (state * MULTIPLIER + increment) & _MASK128, increment


def advance(state: int, increment: int, steps: int) -> int:
    """The PCG64 state `steps` LCG steps later (jump-ahead by repeated squaring)."""
    mult, plus = 1, 0
    cur_mult, cur_plus = MULTIPLIER, increment
    while steps:
        if steps & 1:
            mult = mult * cur_mult & _MASK128
            plus = (plus * cur_mult + cur_plus) & _MASK128
        cur_plus = (cur_mult + 1) * cur_plus & _MASK128
        cur_mult = cur_mult * cur_mult & _MASK128
        steps >>= 1
    return (mult * state + plus) & _MASK128
