//! Spec names (`delivery-properties`, `max-frame-size`) to Rust names.

pub fn studly(name: &str) -> String {
    name.split(['-', '.', '_'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut chars = p.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "try",
    "typeof", "unsized", "virtual", "yield",
];

/// Field names keep the spec's words so they can be looked up; keywords become raw
/// identifiers rather than being renamed.
pub fn snake(name: &str) -> String {
    let s = name.replace(['-', '.'], "_");
    if KEYWORDS.contains(&s.as_str()) {
        format!("r#{s}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn studly_joins_words() {
        assert_eq!(studly("delivery-properties"), "DeliveryProperties");
        assert_eq!(studly("xa-ok"), "XaOk");
        assert_eq!(studly("tune"), "Tune");
    }

    #[test]
    fn snake_escapes_keywords() {
        assert_eq!(snake("max-frame-size"), "max_frame_size");
        assert_eq!(snake("type"), "r#type");
        assert_eq!(snake("global"), "global");
    }
}
