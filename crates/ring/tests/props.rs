//! Property tests: the ring carries any byte stream through any interleaving of push and pop
//! sizes unchanged, and `reply_len` finds exactly the end of any RESP value, however the
//! bytes are cut.
#![cfg(not(loom))]

use goblin_ring::reply::reply_len;
use goblin_ring::ring::{Consumer, Ctl, Producer, RawBytes};
use proptest::prelude::*;

proptest! {
    #[test]
    fn ring_preserves_the_stream(
        log_cap in 2u32..8,
        data in proptest::collection::vec(any::<u8>(), 0..2000),
        steps in proptest::collection::vec((0usize..40, 0usize..40), 1..400),
    ) {
        let cap = 1usize << log_cap;
        let mut area = vec![0u8; cap];
        let ctl = Ctl::new();
        let raw = unsafe { RawBytes::new(area.as_mut_ptr(), cap) };
        let mut p = Producer::new(&ctl, raw);
        let mut c = Consumer::new(&ctl, raw);
        let (mut sent, mut got) = (0usize, Vec::new());
        let mut buf = vec![0u8; 64];
        for (push, pop) in steps.iter().cycle().take(steps.len() * 8) {
            let end = (sent + push).min(data.len());
            let n = p.push(&data[sent..end]).unwrap();
            prop_assert!(n <= cap);
            sent += n;
            let m = c.pop(&mut buf[..*pop]).unwrap();
            got.extend_from_slice(&buf[..m]);
            prop_assert_eq!(c.available().unwrap(), sent - got.len());
            prop_assert_eq!(p.free().unwrap(), cap - (sent - got.len()));
        }
        // Drain what is left.
        loop {
            let n = p.push(&data[sent..]).unwrap();
            sent += n;
            let m = c.pop(&mut buf).unwrap();
            got.extend_from_slice(&buf[..m]);
            if n == 0 && m == 0 {
                break;
            }
        }
        prop_assert_eq!(sent, data.len());
        prop_assert_eq!(&got[..], &data[..]);
        drop(area);
    }
}

/// A random RESP2/RESP3 value, encoded.
fn value() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        "[a-zA-Z0-9 ]{0,12}".prop_map(|s| format!("+{s}\r\n").into_bytes()),
        "[a-zA-Z0-9 ]{0,12}".prop_map(|s| format!("-ERR {s}\r\n").into_bytes()),
        any::<i64>().prop_map(|n| format!(":{n}\r\n").into_bytes()),
        Just(b"$-1\r\n".to_vec()),
        Just(b"_\r\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| {
            let mut v = format!("${}\r\n", b.len()).into_bytes();
            v.extend_from_slice(&b);
            v.extend_from_slice(b"\r\n");
            v
        }),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        (prop_oneof![Just('*'), Just('~'), Just('>'), Just('%')], proptest::collection::vec(inner, 0..6))
            .prop_map(|(kind, items)| {
                // A map counts pairs: keep an even number of items.
                let items = if kind == '%' { &items[..items.len() / 2 * 2] } else { &items[..] };
                let n = if kind == '%' { items.len() / 2 } else { items.len() };
                let mut v = format!("{kind}{n}\r\n").into_bytes();
                for i in items {
                    v.extend_from_slice(i);
                }
                v
            })
    })
}

proptest! {
    #[test]
    fn reply_len_finds_the_end_of_each_value(a in value(), b in value(), cut in any::<prop::sample::Index>()) {
        let mut both = a.clone();
        both.extend_from_slice(&b);
        prop_assert_eq!(reply_len(&both), Ok(Some(a.len())));
        // Any proper prefix of a value is incomplete, never an error or a shorter value.
        let k = cut.index(a.len());
        prop_assert_eq!(reply_len(&a[..k]), Ok(None));
    }

    #[test]
    fn reply_len_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = reply_len(&bytes);
    }
}
