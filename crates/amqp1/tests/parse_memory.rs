//! What parsing a message allocates, counted by a global allocator: a message of many tiny
//! body sections must cost about its own octets, not a handle per section.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use ferry_amqp1::{RawBody, RawMessage};

struct Counting;

thread_local! {
    /// Bytes allocated on this thread (the test's own, not the harness's).
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + layout.size()));
        // SAFETY: forwarded as given.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as given.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated() -> usize {
    ALLOCATED.with(Cell::get)
}

#[test]
fn many_tiny_body_sections_cost_no_handle_each() {
    // 200,000 empty data sections (5 octets each), then a 1-octet one.
    let empty = [0x00, 0x53, 0x75, 0xa0, 0];
    let mut wire = empty.repeat(200_000);
    wire.extend_from_slice(&[0x00, 0x53, 0x75, 0xa0, 1, b'x']);
    let payload = Bytes::from(wire);
    let before = allocated();
    let raw = RawMessage::parse(payload.clone()).expect("parses");
    let used = allocated() - before;
    assert!(used < 4096, "{used} bytes allocated to parse");
    let RawBody::Data(parts) = raw.body() else {
        panic!("{:?}", raw.body());
    };
    assert_eq!(parts.len(), 200_001);
    assert_eq!(parts.iter().last().map(|b| b.to_vec()), Some(b"x".to_vec()));
    // Forwarded as received.
    assert_eq!(raw.bare(), &payload);
    assert_eq!(raw.raw_body(), &payload);
}
