//! What the allocator really hands out, so that `MEMORY USAGE` and the types' `mem_usage()`
//! report allocated bytes rather than requested ones.

/// The size class jemalloc rounds a request of `n` bytes up to: 8, then multiples of 16 up to
/// 128, then four classes per doubling (160, 192, 224, 256, 320, ...), which also holds for
/// its large (page-multiple) classes. Zero bytes allocate nothing.
pub fn size_class(n: usize) -> usize {
    match n {
        0 => 0,
        1..=8 => 8,
        9..=128 => (n + 15) & !15,
        _ => {
            // For n in (2^k, 2^(k+1)] the classes are spaced 2^(k-2) apart.
            let k = usize::BITS - 1 - (n - 1).leading_zeros();
            let step = 1usize << (k - 2);
            (n + step - 1) & !(step - 1)
        }
    }
}

/// Asks the CPU to start loading the cache line at `p` (a hint: never faults, even for an
/// address that is not mapped).
#[inline(always)]
pub(crate) fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it reads nothing the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p.cast(), std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn classes_match_jemalloc() {
        let got: Vec<usize> = [0, 1, 9, 17, 33, 65, 100, 129, 257, 4096, 4097, 8193, 16385]
            .iter()
            .map(|&n| size_class(n))
            .collect();
        assert_eq!(got, vec![0, 8, 16, 32, 48, 80, 112, 160, 320, 4096, 5120, 10240, 20480]);
    }
}
