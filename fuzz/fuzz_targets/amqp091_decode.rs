#![no_main]
// Arbitrary bytes through the 0-9-1 frame decoder, method/header/table decoders and the
// content assembler: none may panic.
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferry_amqp091::fuzz_decode(data));
