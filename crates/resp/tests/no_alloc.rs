//! The multibulk hot path must not allocate once warmed up. A counting global allocator
//! (per thread, so the test harness's own threads do not disturb it) checks it.
//!
//! Run with `cargo test -p resp --test no_alloc`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use resp::RequestParser;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(|c| c.get())
}

#[test]
fn multibulk_path_does_not_allocate_when_warm() {
    let mut stream = Vec::new();
    for i in 0..2000usize {
        let n = 1 + i % 5;
        let args: Vec<Vec<u8>> = (0..n).map(|j| format!("arg{j}-{i}").into_bytes()).collect();
        resp::reply::bulk_array(&mut stream, &args);
    }
    // Cut the stream into uneven pieces so that partial requests (resumed parses) are part of
    // the measured path too.
    let cuts: Vec<usize> = (0..stream.len()).step_by(37).chain([stream.len()]).collect();
    let mut parser = RequestParser::default();
    let run = |parser: &mut RequestParser| {
        let (mut start, mut done, mut bytes) = (0usize, 0usize, 0usize);
        for &end in &cuts {
            while let Some(n) = parser.next(&stream[start..end]).expect("valid stream") {
                bytes += parser.arg_slices(&stream[start..end]).map(|a| a.len()).sum::<usize>();
                start += n;
                done += 1;
            }
        }
        (done, bytes)
    };
    let warm = run(&mut parser);
    assert_eq!(warm.0, 2000);
    let before = allocs();
    let again = run(&mut parser);
    let after = allocs();
    assert_eq!(again, warm);
    assert_eq!(after - before, 0, "the warmed-up multibulk path allocated");
}
