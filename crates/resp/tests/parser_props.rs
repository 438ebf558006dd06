//! Property tests for the request parser and the Frame codec.
//!
//! Run with `cargo test -p resp --test parser_props`.

use proptest::prelude::*;
use resp::{decode_frame, encode_frame, Frame, Limits, ProtocolError, RequestParser};

/// What a connection observes: each complete request's arguments, or the error that ends it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Request(Vec<Vec<u8>>),
    Error(String),
}

/// Feeds `chunks` one after the other into a connection-like buffer, parsing after each one
/// and dropping every complete request from the front, exactly like the server loop.
fn drive_chunks<'a>(limits: &Limits, chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<Event> {
    let mut parser = RequestParser::new(limits.clone());
    let mut buf = Vec::new();
    let mut events = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match parser.next(&buf) {
                Ok(None) => break,
                Ok(Some(n)) => {
                    assert!(n > 0 && n <= buf.len(), "consumed {n} of {}", buf.len());
                    events.push(Event::Request(parser.arg_slices(&buf).map(|a| a.to_vec()).collect()));
                    buf.drain(..n);
                }
                Err(ProtocolError(e)) => {
                    events.push(Event::Error(e));
                    return events;
                }
            }
        }
    }
    events
}

fn drive_whole(limits: &Limits, stream: &[u8]) -> Vec<Event> {
    drive_chunks(limits, [stream])
}

/// Splits `stream` at the given sizes (cycled); a size of 0 is read as 1.
fn chunked<'a>(stream: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < stream.len() {
        let size = sizes.get(i % sizes.len().max(1)).copied().unwrap_or(1).max(1);
        let end = (at + size).min(stream.len());
        out.push(&stream[at..end]);
        at = end;
        i += 1;
    }
    out
}

fn encode_multibulk(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    resp::reply::bulk_array(out, args);
}

/// Writes an argument of an inline request so that Redis's splitting gives it back exactly.
/// `style` picks among the encodings the argument allows: bare word, 'single quotes' (only `\'`
/// is special) or "double quotes" (named escapes, `\xHH`, `\"` and `\\`).
fn encode_inline_arg(out: &mut Vec<u8>, arg: &[u8], style: u8) {
    // A bare word must not hold a separator or quote, and must not start with `*`, which
    // would make the whole line a multibulk request.
    let bare_ok =
        !arg.is_empty() && arg[0] != b'*' && !arg.iter().any(|b| b" \t\r\n\x0b\x0c\0'\"".contains(b));
    let single_ok = !arg.iter().any(|b| b"\\\0\n".contains(b));
    let style = style % 3;
    if style == 0 && bare_ok {
        out.extend_from_slice(arg);
    } else if style == 1 && single_ok {
        out.push(b'\'');
        for &b in arg {
            if b == b'\'' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'\'');
    } else {
        out.push(b'"');
        for &b in arg {
            match b {
                b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x07 => out.extend_from_slice(b"\\a"),
                0x20..=0x7e => out.push(b),
                _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            }
        }
        out.push(b'"');
    }
}

fn binary_arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Mostly the bytes that matter to the framing.
        proptest::collection::vec(
            prop::sample::select(vec![b'\r', b'\n', 0u8, b'$', b'*', b'a', b' ', b'"']),
            0..12
        ),
        proptest::collection::vec(any::<u8>(), 0..40),
        Just(Vec::new()),
    ]
}

fn args() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(binary_arg(), 1..6)
}

/// One request of a stream and the event it must produce.
#[derive(Clone, Debug)]
enum Req {
    Multibulk(Vec<Vec<u8>>),
    /// Inline request (args encoded in the style picked by the u8), ending in LF or CRLF.
    Inline(Vec<Vec<u8>>, bool, u8),
    /// Plain inline words (no quoting at all), separated by varied blanks.
    Words(Vec<String>),
    /// `*0`, `*-1`, a blank line: zero-argument requests.
    Empty(&'static [u8]),
}

fn request() -> impl Strategy<Value = Req> {
    prop_oneof![
        4 => args().prop_map(Req::Multibulk),
        2 => (args(), any::<bool>(), any::<u8>()).prop_map(|(a, crlf, style)| Req::Inline(a, crlf, style)),
        1 => proptest::collection::vec("[a-zA-Z0-9_:.-]{1,8}", 1..5).prop_map(Req::Words),
        1 => prop::sample::select(vec![&b"*0\r\n"[..], b"*-1\r\n", b"\r\n", b"\n", b"   \r\n"]).prop_map(Req::Empty),
    ]
}

fn encode_stream(reqs: &[Req]) -> (Vec<u8>, Vec<Event>) {
    let mut stream = Vec::new();
    let mut expected = Vec::new();
    for r in reqs {
        match r {
            Req::Multibulk(a) => {
                encode_multibulk(&mut stream, a);
                expected.push(Event::Request(a.clone()));
            }
            Req::Inline(a, crlf, style) => {
                for (i, arg) in a.iter().enumerate() {
                    if i > 0 {
                        stream.push(b' ');
                    }
                    encode_inline_arg(&mut stream, arg, style.wrapping_add(i as u8));
                }
                stream.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
                expected.push(Event::Request(a.clone()));
            }
            Req::Words(w) => {
                let seps: [&[u8]; 3] = [b" ", b"\t", b"  \t "];
                for (i, word) in w.iter().enumerate() {
                    stream.extend_from_slice(seps[i % 3]);
                    stream.extend_from_slice(word.as_bytes());
                }
                stream.extend_from_slice(b"\r\n");
                expected.push(Event::Request(w.iter().map(|s| s.as_bytes().to_vec()).collect()));
            }
            Req::Empty(bytes) => {
                stream.extend_from_slice(bytes);
                expected.push(Event::Request(Vec::new()));
            }
        }
    }
    (stream, expected)
}

/// Garbage biased towards the bytes the parser branches on.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let interesting = prop::sample::select(b"*$\r\n0123456789-+ \t\"'\\x\x00aZ\x0b".to_vec());
    prop_oneof![
        proptest::collection::vec(interesting, 0..80),
        proptest::collection::vec(any::<u8>(), 0..80),
        // A valid prefix followed by garbage.
        (args(), proptest::collection::vec(any::<u8>(), 0..20)).prop_map(|(a, tail)| {
            let mut s = Vec::new();
            encode_multibulk(&mut s, &a);
            let cut = s.len() * 2 / 3;
            s.truncate(cut);
            s.extend(tail);
            s
        }),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    let line =
        proptest::collection::vec(any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'), 0..16);
    let leaf = prop_oneof![
        line.clone().prop_map(Frame::Simple),
        line.prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        proptest::option::of(binary_arg()).prop_map(Frame::Bulk),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        proptest::option::of(proptest::collection::vec(inner, 0..6)).prop_map(Frame::Array)
    })
}

fn small_limits() -> Limits {
    Limits { max_bulk_len: 16, max_multibulk_len: 4, max_inline_len: 24 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// (1) Any binary args encoded as multibulk parse back to the same args, in one piece.
    #[test]
    fn multibulk_roundtrip(a in args()) {
        let mut stream = Vec::new();
        encode_multibulk(&mut stream, &a);
        let mut p = RequestParser::default();
        prop_assert_eq!(p.next(&stream), Ok(Some(stream.len())));
        prop_assert!(!p.is_inline());
        prop_assert_eq!(p.argc(), a.len());
        let got: Vec<Vec<u8>> = p.arg_slices(&stream).map(|s| s.to_vec()).collect();
        prop_assert_eq!(&got, &a);
        // The raw ranges index the caller's buffer directly on this path.
        let by_range: Vec<Vec<u8>> = p.args().iter().map(|r| stream[r.clone()].to_vec()).collect();
        prop_assert_eq!(by_range, a);
    }

    /// (1b) Any binary args quoted for an inline request parse back to the same args.
    #[test]
    fn inline_quoted_roundtrip(a in args(), crlf in any::<bool>(), style in any::<u8>()) {
        let (stream, expected) = encode_stream(&[Req::Inline(a, crlf, style)]);
        prop_assert_eq!(drive_whole(&Limits::default(), &stream), expected);
    }

    /// (2) A stream of mixed requests gives the same events whole, cut at every point, and in
    /// random chunkings.
    #[test]
    fn any_split_gives_same_requests(
        reqs in proptest::collection::vec(request(), 1..6),
        sizes in proptest::collection::vec(0usize..12, 1..8),
    ) {
        let (stream, expected) = encode_stream(&reqs);
        let limits = Limits::default();
        let whole = drive_whole(&limits, &stream);
        prop_assert_eq!(&whole, &expected);
        for cut in 0..=stream.len() {
            let two = drive_chunks(&limits, [&stream[..cut], &stream[cut..]]);
            prop_assert_eq!(&two, &whole, "cut at {}", cut);
        }
        prop_assert_eq!(&drive_chunks(&limits, chunked(&stream, &sizes)), &whole);
        prop_assert_eq!(&drive_chunks(&limits, chunked(&stream, &[1])), &whole);
    }

    /// (2b) Same for garbage streams, which end in an error (or stay incomplete): the error
    /// text must not depend on how the bytes arrived. Small limits exercise the length errors;
    /// whole-stream results under them are still split-independent for the bulk/count limits.
    #[test]
    fn any_split_gives_same_errors(stream in garbage(), sizes in proptest::collection::vec(0usize..9, 1..6)) {
        let limits = Limits::default();
        let whole = drive_whole(&limits, &stream);
        for cut in 0..=stream.len() {
            prop_assert_eq!(&drive_chunks(&limits, [&stream[..cut], &stream[cut..]]), &whole, "cut at {}", cut);
        }
        prop_assert_eq!(&drive_chunks(&limits, chunked(&stream, &sizes)), &whole);
    }

    /// (3) Frames survive encode/decode, and every strict prefix is reported incomplete.
    #[test]
    fn frame_roundtrip(f in frame()) {
        let mut out = Vec::new();
        encode_frame(&mut out, &f);
        prop_assert_eq!(decode_frame(&out), Ok(Some((f.clone(), out.len()))));
        for cut in 0..out.len() {
            prop_assert_eq!(decode_frame(&out[..cut]), Ok(None), "cut at {}", cut);
        }
        // Followed by more data, the frame still ends where it should.
        out.extend_from_slice(b"+next\r\n");
        prop_assert_eq!(decode_frame(&out).map(|r| r.map(|(_, n)| n)), Ok(Some(out.len() - 7)));
    }

    /// `peek` agrees with `next`: wherever it names a request (in a stream of every request
    /// shape, cut anywhere, or in garbage), `next` parses a request of that length whose second
    /// argument is the range it gave. And it does name every plain multibulk request that is
    /// whole in the buffer (it is what the server looks ahead with).
    #[test]
    fn peek_agrees_with_next(
        reqs in proptest::collection::vec(request(), 1..8),
        cut in any::<prop::sample::Index>(),
        junk in garbage(),
    ) {
        let (stream, _) = encode_stream(&reqs);
        let cut = cut.index(stream.len() + 1);
        for limits in [Limits::default(), small_limits()] {
            for buf in [&stream[..], &stream[..cut], &junk[..]] {
                let mut parser = RequestParser::new(limits.clone());
                let mut at = 0;
                while at < buf.len() {
                    let peeked = parser.peek(&buf[at..], u64::MAX);
                    let parsed = match parser.next(&buf[at..]) {
                        Ok(Some(n)) => n,
                        _ => {
                            prop_assert_eq!(peeked, None);
                            break;
                        }
                    };
                    if let Some((n, second)) = peeked {
                        prop_assert_eq!(n, parsed);
                        let args: Vec<&[u8]> = parser.arg_slices(&buf[at..]).collect();
                        prop_assert_eq!(second.map(|r| &buf[at..][r]), args.get(1).copied());
                    }
                    at += parsed;
                }
            }
        }
        // Whole plain multibulk requests are always named, with default limits.
        let parser = RequestParser::default();
        let mut one = Vec::new();
        for r in &reqs {
            if let Req::Multibulk(a) = r {
                one.clear();
                encode_multibulk(&mut one, a);
                let (n, second) = parser.peek(&one, a.len() as u64).expect("a whole multibulk request is named");
                if a.len() > 1 {
                    prop_assert_eq!(parser.peek(&one, a.len() as u64 - 1), None);
                }
                prop_assert_eq!(n, one.len());
                prop_assert_eq!(second.map(|r| one[r].to_vec()), a.get(1).cloned());
            }
        }
    }

    /// (4) Garbage never panics: the parser returns a request, an error or "incomplete", with
    /// default and tiny limits, whole and byte by byte; decode_frame likewise.
    #[test]
    fn garbage_never_panics(stream in garbage()) {
        for limits in [Limits::default(), small_limits()] {
            let events = drive_whole(&limits, &stream);
            let _ = drive_chunks(&limits, chunked(&stream, &[1]));
            // At most one error, and only as the last event.
            let errors = events.iter().filter(|e| matches!(e, Event::Error(_))).count();
            prop_assert!(errors <= 1);
            if errors == 1 {
                prop_assert!(matches!(events.last(), Some(Event::Error(_))));
            }
        }
        let _ = decode_frame(&stream);
    }
}

/// Feeds growing prefixes of `stream` (one more byte each time) and expects one request at
/// the very end; fails as soon as `budget` is exceeded rather than running for hours.
fn feed_byte_by_byte(p: &mut RequestParser, stream: &[u8], budget: std::time::Duration) {
    let started = std::time::Instant::now();
    for end in 1..stream.len() {
        assert_eq!(p.next(&stream[..end]), Ok(None), "prefix of {end} bytes");
        if end % 1024 == 0 {
            assert!(started.elapsed() < budget, "only {end} of {} bytes after {budget:?}", stream.len());
        }
    }
    assert_eq!(p.next(stream), Ok(Some(stream.len())));
    assert!(started.elapsed() < budget, "took {:?}", started.elapsed());
}

/// Many small arguments fed one byte at a time: a parser that re-scans the request from its
/// start on every call would do ~10^11 byte steps here and blow the time bound; one that
/// resumes does ~10^6.
#[test]
fn byte_by_byte_is_linear() {
    let args: Vec<Vec<u8>> = (0..100_000).map(|i| vec![b'a' + (i % 26) as u8]).collect();
    let mut stream = Vec::new();
    encode_multibulk(&mut stream, &args);
    let mut p = RequestParser::default();
    feed_byte_by_byte(&mut p, &stream, std::time::Duration::from_secs(5));
    assert_eq!(p.argc(), args.len());
}

/// Same for one long inline line (under a raised inline limit), fed byte by byte: re-scanning
/// the line for its end on every call would be ~10^13 byte steps, even a fast memchr would
/// take hours; resuming is ~4 * 10^6. (A line under the default 64 KiB limit would re-scan in
/// ~2 * 10^9 steps, about a second with memchr: within any budget that never flakes.)
#[test]
fn long_inline_line_byte_by_byte_is_linear() {
    let mut stream = vec![b'x'; 4 << 20];
    stream.push(b'\n');
    let mut p = RequestParser::new(Limits { max_inline_len: 8 << 20, ..Limits::default() });
    feed_byte_by_byte(&mut p, &stream, std::time::Duration::from_secs(10));
    assert_eq!(p.argc(), 1);
}
