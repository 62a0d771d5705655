#![no_main]
// Arbitrary bytes through the AMQP 1.0 frame decoder and the value, performative, SASL and
// message decoders: none may panic, and what decodes must re-encode stably.
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferry_amqp1::fuzz_decode(data));
