//! Doubles as Redis 8 writes them in replies (ZSCORE, ZRANGE WITHSCORES, GEOPOS, ...): Redis
//! 7.2 replaced C's `%.17g` with Grisu2 digits, so `0.1` reads `0.1` and no longer
//! `0.10000000000000001`.
//!
//! The rules, in Redis's order: `nan`, `inf`, `-inf`, `0` and `-0` by name; an integral value
//! within +-2^62 as a plain integer; anything else as the digits Grisu2 (Loitsch, "Printing
//! Floating-Point Numbers Quickly and Accurately with Integers", PLDI 2010) generates with 64-bit
//! cached powers of ten, laid out as a plain integer (up to 7 trailing zeros), a plain decimal
//! (fewer than 7 places after the point, or an exponent under 4), or `d.ddde+XX`/`d.ddde-X` with
//! a one- to three-digit exponent.
//!
//! Grisu2's digits always read back as the same double, and are the shortest such digits for
//! nearly every input, but not all: for about 0.3% of arbitrary doubles it emits one digit more,
//! or a last digit one off the closest, than a shortest-digits printer (Rust's `{}`) would. A
//! client comparing reply text with Redis's sees those too, so this is Grisu2 exactly, the
//! variant Redis ships: the cached power is the first one found walking from an estimate of the
//! decimal exponent into the window [-60, -32] of binary exponents, the boundaries are narrowed
//! by one unit each, and the last digit is moved toward the value while it stays inside them.
//! `tests::grisu2_digits_read_back` checks the round trip on random doubles; the reply texts are
//! compared with redis-server 8.2 in `crates/goblin-core/tests/differential.rs`.

/// A float as an unsigned significand and a binary exponent: `f * 2^e`.
#[derive(Clone, Copy, Debug)]
struct Fp {
    f: u64,
    e: i32,
}

const HIDDEN_BIT: u64 = 1 << 52;
const FRACTION_MASK: u64 = HIDDEN_BIT - 1;

/// The window of binary exponents the scaled value is brought into, so that its integral part
/// fits 32 bits and the fractional part leaves room for a multiplication by 10.
const ALPHA: i32 = -60;
const GAMMA: i32 = -32;

/// 10^k for k = -348, -340, ..., 340: the 64-bit significand (top bit set), rounded to
/// nearest, and its binary exponent. Computed with exact rationals: `f = round(10^k / 2^e)` with
/// `2^63 <= f < 2^64` (`tests::cached_powers_are_powers_of_ten` checks their shape).
const CACHED_POWERS: [(u64, i32); 87] = [
    (0xfa8fd5a0081c0288, -1220),
    (0xbaaee17fa23ebf76, -1193),
    (0x8b16fb203055ac76, -1166),
    (0xcf42894a5dce35ea, -1140),
    (0x9a6bb0aa55653b2d, -1113),
    (0xe61acf033d1a45df, -1087),
    (0xab70fe17c79ac6ca, -1060),
    (0xff77b1fcbebcdc4f, -1034),
    (0xbe5691ef416bd60c, -1007),
    (0x8dd01fad907ffc3c, -980),
    (0xd3515c2831559a83, -954),
    (0x9d71ac8fada6c9b5, -927),
    (0xea9c227723ee8bcb, -901),
    (0xaecc49914078536d, -874),
    (0x823c12795db6ce57, -847),
    (0xc21094364dfb5637, -821),
    (0x9096ea6f3848984f, -794),
    (0xd77485cb25823ac7, -768),
    (0xa086cfcd97bf97f4, -741),
    (0xef340a98172aace5, -715),
    (0xb23867fb2a35b28e, -688),
    (0x84c8d4dfd2c63f3b, -661),
    (0xc5dd44271ad3cdba, -635),
    (0x936b9fcebb25c996, -608),
    (0xdbac6c247d62a584, -582),
    (0xa3ab66580d5fdaf6, -555),
    (0xf3e2f893dec3f126, -529),
    (0xb5b5ada8aaff80b8, -502),
    (0x87625f056c7c4a8b, -475),
    (0xc9bcff6034c13053, -449),
    (0x964e858c91ba2655, -422),
    (0xdff9772470297ebd, -396),
    (0xa6dfbd9fb8e5b88f, -369),
    (0xf8a95fcf88747d94, -343),
    (0xb94470938fa89bcf, -316),
    (0x8a08f0f8bf0f156b, -289),
    (0xcdb02555653131b6, -263),
    (0x993fe2c6d07b7fac, -236),
    (0xe45c10c42a2b3b06, -210),
    (0xaa242499697392d3, -183),
    (0xfd87b5f28300ca0e, -157),
    (0xbce5086492111aeb, -130),
    (0x8cbccc096f5088cc, -103),
    (0xd1b71758e219652c, -77),
    (0x9c40000000000000, -50),
    (0xe8d4a51000000000, -24),
    (0xad78ebc5ac620000, 3),
    (0x813f3978f8940984, 30),
    (0xc097ce7bc90715b3, 56),
    (0x8f7e32ce7bea5c70, 83),
    (0xd5d238a4abe98068, 109),
    (0x9f4f2726179a2245, 136),
    (0xed63a231d4c4fb27, 162),
    (0xb0de65388cc8ada8, 189),
    (0x83c7088e1aab65db, 216),
    (0xc45d1df942711d9a, 242),
    (0x924d692ca61be758, 269),
    (0xda01ee641a708dea, 295),
    (0xa26da3999aef774a, 322),
    (0xf209787bb47d6b85, 348),
    (0xb454e4a179dd1877, 375),
    (0x865b86925b9bc5c2, 402),
    (0xc83553c5c8965d3d, 428),
    (0x952ab45cfa97a0b3, 455),
    (0xde469fbd99a05fe3, 481),
    (0xa59bc234db398c25, 508),
    (0xf6c69a72a3989f5c, 534),
    (0xb7dcbf5354e9bece, 561),
    (0x88fcf317f22241e2, 588),
    (0xcc20ce9bd35c78a5, 614),
    (0x98165af37b2153df, 641),
    (0xe2a0b5dc971f303a, 667),
    (0xa8d9d1535ce3b396, 694),
    (0xfb9b7cd9a4a7443c, 720),
    (0xbb764c4ca7a44410, 747),
    (0x8bab8eefb6409c1a, 774),
    (0xd01fef10a657842c, 800),
    (0x9b10a4e5e9913129, 827),
    (0xe7109bfba19c0c9d, 853),
    (0xac2820d9623bf429, 880),
    (0x80444b5e7aa7cf85, 907),
    (0xbf21e44003acdd2d, 933),
    (0x8e679c2f5e44ff8f, 960),
    (0xd433179d9c8cb841, 986),
    (0x9e19db92b4e31ba9, 1013),
    (0xeb96bf6ebadf77d9, 1039),
    (0xaf87023b9bf0ee6b, 1066),
];
const FIRST_POWER: i32 = -348;
const POWER_STEP: i32 = 8;

impl Fp {
    fn of(v: f64) -> Fp {
        let bits = v.to_bits();
        let frac = bits & FRACTION_MASK;
        match ((bits >> 52) & 0x7ff) as i32 {
            0 => Fp { f: frac, e: -1074 },
            biased => Fp { f: frac | HIDDEN_BIT, e: biased - 1075 },
        }
    }

    /// Shifted until bit 63 is set.
    fn normalized(self) -> Fp {
        let mut fp = self;
        while fp.f & HIDDEN_BIT == 0 {
            fp.f <<= 1;
            fp.e -= 1;
        }
        Fp { f: fp.f << 11, e: fp.e - 11 }
    }

    /// The two midpoints to the neighbouring doubles, both with the upper one's exponent (whose
    /// significand is normalized); the lower gap is half as wide below a power of two.
    fn boundaries(self) -> (Fp, Fp) {
        let mut upper = Fp { f: (self.f << 1) + 1, e: self.e - 1 };
        while upper.f & (HIDDEN_BIT << 1) == 0 {
            upper.f <<= 1;
            upper.e -= 1;
        }
        upper = Fp { f: upper.f << 10, e: upper.e - 10 };
        let shift = if self.f == HIDDEN_BIT { 2 } else { 1 };
        let lower = Fp { f: ((self.f << shift) - 1) << (self.e - shift - upper.e), e: upper.e };
        (lower, upper)
    }

    /// The product's top 64 bits, rounded half up.
    fn times(self, o: Fp) -> Fp {
        let p = self.f as u128 * o.f as u128 + (1u128 << 63);
        Fp { f: (p >> 64) as u64, e: self.e + o.e + 64 }
    }
}

/// The cached power that brings a value with binary exponent `e` into [ALPHA, GAMMA], and its
/// decimal exponent. Where two do, the one nearer the estimate is taken (as Redis does).
fn cached_power(e: i32) -> (Fp, i32) {
    // The estimate truncates toward zero twice, as C's conversions do.
    let approx = (f64::from(-(e + 87)) * 0.301_029_995_663_981_14) as i32;
    let mut i = ((approx - FIRST_POWER) / POWER_STEP) as usize;
    loop {
        let (f, pe) = CACHED_POWERS[i];
        let scaled = e + pe + 64;
        if scaled < ALPHA {
            i += 1;
        } else if scaled > GAMMA {
            i -= 1;
        } else {
            return (Fp { f, e: pe }, FIRST_POWER + i as i32 * POWER_STEP);
        }
    }
}

const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// Moves the last digit down, one step of `unit` at a time, while the candidate stays above the
/// lower boundary (`rest <= delta`) and gets closer to the scaled value (`distance` below the
/// upper boundary). Wrapping arithmetic: the C original's unsigned overflow is part of its
/// answer in the rare cases where it happens.
fn move_toward_value(digits: &mut [u8], delta: u64, mut rest: u64, unit: u64, distance: u64) {
    let last = digits.len() - 1;
    while rest < distance
        && delta.wrapping_sub(rest) >= unit
        && (rest.wrapping_add(unit) < distance
            || distance.wrapping_sub(rest) > rest.wrapping_add(unit).wrapping_sub(distance))
    {
        digits[last] -= 1;
        rest = rest.wrapping_add(unit);
    }
}

/// Grisu2's digits of a finite, non-zero, positive `v` into `digits` (at most 18), and the
/// decimal exponent K of the last one: `v ~= digits * 10^K`.
fn grisu2(v: f64, digits: &mut [u8; 18]) -> (usize, i32) {
    let w = Fp::of(v);
    let (lower, upper) = w.boundaries();
    let (power, k) = cached_power(upper.e);
    let w = w.normalized().times(power);
    let mut upper = upper.times(power);
    let mut lower = lower.times(power);
    lower.f += 1;
    upper.f -= 1;
    let mut exp10 = -k;

    let distance = upper.f - w.f;
    let mut delta = upper.f - lower.f;
    let shift = (-upper.e) as u32;
    let one = 1u64 << shift;
    let mut integral = upper.f >> shift;
    let mut fraction = upper.f & (one - 1);
    let mut n = 0;
    // The integral part: up to ten digits, stopping as soon as the rest is within delta.
    for kappa in (0..10).rev() {
        let div = POW10[kappa];
        let digit = integral / div;
        if digit != 0 || n != 0 {
            digits[n] = b'0' + digit as u8;
            n += 1;
        }
        integral -= digit * div;
        let rest = (integral << shift) + fraction;
        if rest <= delta {
            exp10 += kappa as i32;
            move_toward_value(&mut digits[..n], delta, rest, div << shift, distance);
            return (n, exp10);
        }
    }
    // The fractional part, one digit per multiplication by ten.
    let mut kappa = 0i32;
    let mut scale = 1usize;
    loop {
        fraction *= 10;
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let digit = fraction >> shift;
        if digit != 0 || n != 0 {
            digits[n] = b'0' + digit as u8;
            n += 1;
        }
        fraction &= one - 1;
        if fraction < delta {
            exp10 += kappa;
            move_toward_value(&mut digits[..n], delta, fraction, one, distance.wrapping_mul(POW10[scale]));
            return (n, exp10);
        }
        scale += 1;
    }
}

/// Appends `v` as Redis 8 writes a double reply (module docs).
pub fn push_double(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        return out.extend_from_slice(b"nan");
    }
    if v.is_infinite() {
        return out.extend_from_slice(if v > 0.0 { b"inf" } else { b"-inf" });
    }
    if v == 0.0 {
        return out.extend_from_slice(if v.is_sign_negative() { b"-0" } else { b"0" });
    }
    push_number(out, v);
}

/// Appends `v` as Redis 8 turns a Lua number into a command argument: the integer rule, then
/// Grisu2 (where `-0` is `0` and the special values have no `-` before `nan`).
pub fn push_number(out: &mut Vec<u8>, v: f64) {
    // Redis prints integral values within +-(2^63-1)/2 (as a double: 2^62) as integers.
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if (-LIMIT..=LIMIT).contains(&v) && (v as i64) as f64 == v {
        return out.extend_from_slice(itoa::Buffer::new().format(v as i64).as_bytes());
    }
    if v.is_sign_negative() {
        out.push(b'-');
    }
    if v.is_nan() {
        return out.extend_from_slice(b"nan");
    }
    if v.is_infinite() {
        return out.extend_from_slice(b"inf");
    }
    let neg = v.is_sign_negative();
    let mut buf = [0u8; 18];
    let (n, k) = grisu2(v.abs(), &mut buf);
    let digits = &buf[..n];
    let n = n as i32;
    let exp = (k + n - 1).abs();
    if k >= 0 && exp < n + 7 {
        // An integer: the digits and k zeros.
        out.extend_from_slice(digits);
        out.resize(out.len() + k as usize, b'0');
    } else if k < 0 && (k > -7 || exp < 4) {
        // A decimal without exponent.
        let int_len = n + k;
        if int_len <= 0 {
            out.extend_from_slice(b"0.");
            out.resize(out.len() + (-int_len) as usize, b'0');
            out.extend_from_slice(digits);
        } else {
            out.extend_from_slice(&digits[..int_len as usize]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len as usize..]);
        }
    } else {
        let digits = &digits[..digits.len().min(18 - neg as usize)];
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if k + n - 1 < 0 { b'-' } else { b'+' });
        out.extend_from_slice(itoa::Buffer::new().format(exp).as_bytes());
    }
}

/// [`push_double`] as a String.
pub fn double_text(v: f64) -> String {
    let mut out = Vec::with_capacity(24);
    push_double(&mut out, v);
    String::from_utf8(out).expect("digits and signs are ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn texts_redis_8_writes() {
        // Each checked against redis-server 8.2.3 (ZADD z <v> m, then ZSCORE z m).
        for (v, text) in [
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.5e-7, "1.5e-7"),
            (1e-7, "1e-7"),
            (0.00001, "0.00001"),
            (0.000001, "0.000001"),
            (1e20, "1e+20"),
            (1e19, "1e+19"),
            (4.5e18, "4500000000000000000"),
            (1e25, "1e+25"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (1e17, "100000000000000000"),
            (123456789012345678.0, "123456789012345680"),
            (-9.433050469559874e22, "-94330504695598740000000"),
            (1.234567890123456e23, "1.234567890123456e+23"),
            (6790953388218459136.0, "6790953388218459000"),
            (-3.516343413605676e57, "-3.5163434136056763e+57"),
            (-3507837598158.6562, "-3507837598158.6563"),
            (-49.49999999942494, "-49.499999999424936"),
            (0.00037296770835815955, "3.7296770835815955e-4"),
            (87833.40378971731, "8.783340378971731e+4"),
            (87833.5, "87833.5"),
            (-1.5, "-1.5"),
            (-7.0, "-7"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (-0.0, "-0"),
            (12345678.9, "12345678.9"),
        ] {
            assert_eq!(double_text(v), text, "{v:e}");
        }
    }

    #[test]
    fn cached_powers_are_powers_of_ten() {
        for (i, &(f, e)) in CACHED_POWERS.iter().enumerate() {
            let k = FIRST_POWER + i as i32 * POWER_STEP;
            assert!(f >> 63 == 1, "10^{k} is not normalized");
            // log2(10^k) lies within [e + 63, e + 64).
            let log2 = f64::from(k) * std::f64::consts::LOG2_10;
            assert!(log2 >= f64::from(e + 63) - 1e-9 && log2 < f64::from(e + 64) + 1e-9, "10^{k}");
            // The powers that fit 128 bits (k = 4, 12, 20, 28, 36), exactly: the top 64 bits
            // rounded to nearest.
            if (0..=38).contains(&k) {
                let v = 10u128.pow(k as u32);
                let bits = 128 - v.leading_zeros() as i32;
                let (want, exp) = if bits <= 64 {
                    ((v << (64 - bits)) as u64, bits - 64)
                } else {
                    let shift = bits - 64;
                    let top = (v >> shift) as u64;
                    (top + ((v >> (shift - 1)) & 1) as u64, shift)
                };
                assert_eq!((f, e), (want, exp), "10^{k}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn grisu2_digits_read_back(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            let text = double_text(v);
            let back: f64 = text.parse().unwrap();
            prop_assert_eq!(back.to_bits(), v.to_bits(), "{} -> {}", v, text);
            // Never longer than 17 significant digits.
            let digits = text.split('e').next().unwrap().bytes().filter(u8::is_ascii_digit).count();
            prop_assert!(digits <= 17 + 7, "{}", text);
        }
    }
}
