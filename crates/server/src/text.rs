//! Small helpers for the texts we put on the wire.

/// `text` cut to at most `max` bytes at a character boundary (protocol short strings hold
/// 255 bytes, and error texts quote names the peer chose).
pub fn truncated(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_a_character_boundary() {
        assert_eq!(truncated("abc", 255), "abc");
        assert_eq!(truncated("abcdef", 3), "abc");
        // 'é' is two bytes: cutting in its middle backs off to before it.
        assert_eq!(truncated("aé", 2), "a");
        let long = "ü".repeat(200);
        assert!(truncated(&long, 255).len() <= 255);
    }
}
