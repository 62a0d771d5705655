//! The parts of the 0-10 spec XML the generator needs, read into plain data.

use crate::Error;

#[derive(Debug, Clone)]
pub struct Spec {
    pub types: Vec<TypeDef>,
    pub domains: Vec<Domain>,
    pub classes: Vec<Class>,
}

#[derive(Debug, Clone)]
pub struct TypeDef {
    pub name: String,
    pub code: Option<u8>,
    pub width: Width,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    Fixed(u32),
    /// Size prefix of this many octets precedes the value.
    Variable(u32),
}

#[derive(Debug, Clone)]
pub struct Domain {
    pub name: String,
    /// `None` for top-level domains.
    pub class: Option<String>,
    pub ty: String,
    pub choices: Vec<Choice>,
}

#[derive(Debug, Clone)]
pub struct Choice {
    pub name: String,
    pub value: u64,
}

#[derive(Debug, Clone)]
pub struct Class {
    pub name: String,
    pub domains: Vec<Domain>,
    pub structs: Vec<StructDef>,
    pub controls: Vec<Op>,
    pub commands: Vec<Op>,
}

#[derive(Debug, Clone)]
pub struct StructDef {
    pub name: String,
    pub class: String,
    pub class_code: u8,
    pub code: Option<u8>,
    pub size: u8,
    pub pack: u8,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone)]
pub struct Op {
    pub name: String,
    pub class: String,
    pub class_code: u8,
    pub code: u8,
    pub fields: Vec<Field>,
    /// Name of the result struct, for commands that return one.
    pub result: Option<String>,
    /// Whether header/body segments may follow the command segment.
    pub has_segments: bool,
}

#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub ty: String,
}

type Node<'a, 'i> = roxmltree::Node<'a, 'i>;

fn attr<'a>(node: Node<'a, '_>, name: &str) -> Result<&'a str, Error> {
    node.attribute(name).ok_or_else(|| {
        Error::Spec(format!(
            "<{}> at byte {} lacks attribute {name}",
            node.tag_name().name(),
            node.range().start
        ))
    })
}

fn number(text: &str) -> Result<u64, Error> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| Error::Spec(format!("not a number: {text:?}")))
}

fn small(text: &str) -> Result<u8, Error> {
    u8::try_from(number(text)?).map_err(|_| Error::Spec(format!("does not fit a u8: {text}")))
}

fn children<'a, 'i>(node: Node<'a, 'i>, tag: &'a str) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == tag)
}

pub fn parse(xml: &str) -> Result<Spec, Error> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| Error::Spec(e.to_string()))?;
    let root = doc.root_element();
    if root.tag_name().name() != "amqp" {
        return Err(Error::Spec("root element is not <amqp>".into()));
    }
    let mut spec = Spec {
        types: Vec::new(),
        domains: Vec::new(),
        classes: Vec::new(),
    };
    for node in children(root, "type") {
        spec.types.push(parse_type(node)?);
    }
    for node in children(root, "domain") {
        spec.domains.push(parse_domain(node, None)?);
    }
    for node in children(root, "class") {
        spec.classes.push(parse_class(node)?);
    }
    Ok(spec)
}

fn parse_type(node: Node) -> Result<TypeDef, Error> {
    let name = attr(node, "name")?.to_string();
    let code = node.attribute("code").map(small).transpose()?;
    let width = match (
        node.attribute("fixed-width"),
        node.attribute("variable-width"),
    ) {
        (Some(w), None) => Width::Fixed(number(w)? as u32),
        (None, Some(w)) => Width::Variable(number(w)? as u32),
        _ => return Err(Error::Spec(format!("type {name} needs exactly one width"))),
    };
    Ok(TypeDef { name, code, width })
}

fn parse_domain(node: Node, class: Option<&str>) -> Result<Domain, Error> {
    let mut choices = Vec::new();
    for e in children(node, "enum") {
        for c in children(e, "choice") {
            choices.push(Choice {
                name: attr(c, "name")?.to_string(),
                value: number(attr(c, "value")?)?,
            });
        }
    }
    Ok(Domain {
        name: attr(node, "name")?.to_string(),
        class: class.map(str::to_string),
        ty: attr(node, "type")?.to_string(),
        choices,
    })
}

fn parse_fields(node: Node) -> Result<Vec<Field>, Error> {
    children(node, "field")
        .map(|f| {
            Ok(Field {
                name: attr(f, "name")?.to_string(),
                ty: attr(f, "type")?.to_string(),
            })
        })
        .collect()
}

fn parse_struct(node: Node, class: &str, class_code: u8) -> Result<StructDef, Error> {
    Ok(StructDef {
        name: attr(node, "name")?.to_string(),
        class: class.to_string(),
        class_code,
        code: node.attribute("code").map(small).transpose()?,
        size: node.attribute("size").map(small).transpose()?.unwrap_or(0),
        pack: node.attribute("pack").map(small).transpose()?.unwrap_or(0),
        fields: parse_fields(node)?,
    })
}

fn parse_class(node: Node) -> Result<Class, Error> {
    let name = attr(node, "name")?.to_string();
    let code = small(attr(node, "code")?)?;
    let mut class = Class {
        name: name.clone(),
        domains: Vec::new(),
        structs: Vec::new(),
        controls: Vec::new(),
        commands: Vec::new(),
    };
    for child in node.children().filter(|c| c.is_element()) {
        match child.tag_name().name() {
            "domain" => class.domains.push(parse_domain(child, Some(&name))?),
            "struct" => class.structs.push(parse_struct(child, &name, code)?),
            "control" => class.controls.push(parse_op(child, &name, code)?),
            "command" => {
                // Result structs are declared inline in their command but are ordinary
                // coded structs of the class (they travel in execution.result).
                for result in children(child, "result") {
                    for s in children(result, "struct") {
                        class.structs.push(parse_struct(s, &name, code)?);
                    }
                }
                class.commands.push(parse_op(child, &name, code)?);
            }
            _ => {}
        }
    }
    Ok(class)
}

fn parse_op(node: Node, class: &str, class_code: u8) -> Result<Op, Error> {
    let result = children(node, "result").next().and_then(|r| {
        r.attribute("type").map(str::to_string).or_else(|| {
            children(r, "struct")
                .next()
                .and_then(|s| s.attribute("name"))
                .map(str::to_string)
        })
    });
    Ok(Op {
        name: attr(node, "name")?.to_string(),
        class: class.to_string(),
        class_code,
        code: small(attr(node, "code")?)?,
        fields: parse_fields(node)?,
        result,
        has_segments: children(node, "segments").next().is_some(),
    })
}
