//! The SSE parser on arbitrary bytes split at arbitrary points: it must never panic, and
//! the split must never change what it parses.
#![no_main]

use keel_llm::sse::SseParser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split_seed, bytes)) = data.split_first() else { return };
    let mut whole = Vec::new();
    SseParser::new().feed(bytes, &mut whole);
    let mut parts = Vec::new();
    let mut parser = SseParser::new();
    let step = usize::from(split_seed).max(1);
    for chunk in bytes.chunks(step) {
        parser.feed(chunk, &mut parts);
    }
    assert_eq!(whole, parts);
});
