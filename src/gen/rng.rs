//! Pseudo-random numbers: SplitMix64, seedable and portable, for the synthetic caches and the
//! benchmark's workload sampler.

/// SplitMix64: tiny, fast and good enough for synthetic data.
#[derive(Debug, Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform `usize` in `0..n`.
    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Index chosen with probability proportional to `weight(item)`.
    pub(crate) fn weighted<T>(&mut self, items: &[T], weight: impl Fn(&T) -> u32) -> usize {
        let total: u64 = items.iter().map(|i| u64::from(weight(i))).sum();
        let mut roll = self.below(total);
        for (k, item) in items.iter().enumerate() {
            let w = u64::from(weight(item));
            if roll < w {
                return k;
            }
            roll -= w;
        }
        items.len() - 1
    }
}

pub(super) fn mix(a: u64, b: u64) -> u64 {
    Rng(a ^ b.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// The stream for one (salt, index) pair of a seed.
pub(super) fn stream(seed: u64, salt: u64, index: u64) -> Rng {
    Rng(mix(mix(seed, salt), index))
}
