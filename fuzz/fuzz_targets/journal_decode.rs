#![no_main]
// Arbitrary bytes as a journal segment: frame reader, record and message decoders must never
// panic, whatever recovery finds on disk.
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferry_store::fuzz_decode(data));
