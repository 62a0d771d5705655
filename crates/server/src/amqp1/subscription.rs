//! Durable subscriptions (a JMS durable subscriber over 1.0): a link to an exchange whose
//! source is durable (or never expires) gets a durable queue named after the client's
//! container id and the link's name, bound to the exchange. The queue outlives the link, the
//! connection and a restart, collecting what the exchange routes to it; attaching a link of
//! the same name from the same container resumes it, and a detach with `closed` set ends it.
//! A link with no source asks whether such a subscription exists (how Qpid JMS
//! unsubscribes: it attaches, then closes the link). A selector is part of the
//! subscription: another one replaces it, and its consumer drops what it does not match.
//!
//! JMS 2 shared subscriptions (source capability `shared`) let several links consume one
//! subscription's queue. Qpid JMS names their links `name`, `name|2`, ... when durable and
//! `name|volatile1`, ... when not, with `global` in the name and in the capabilities when the
//! connection has no client id: the subscription is the link name without that suffix, scoped
//! by the container id unless global. A shared durable subscription lives as an unshared
//! one does; a shared volatile one goes with its last link.

use std::sync::Arc;

use ferry_acl::{Action, ObjectType};
use ferry_amqp1::condition;
use ferry_core::{Arguments, Exchange, HeaderValue, Queue, QueueOptions};

use super::error::Fault;
use super::session::Ctx;
use crate::access;

/// The argument that records what a subscription's queue is bound to: attaching with
/// another exchange or key replaces the subscription, as JMS asks for a changed topic.
const SOURCE_ARGUMENT: &str = "x-ferry-subscription-source";
/// The subscription's JMS selector, if it has one: a changed selector replaces it too.
const SELECTOR_ARGUMENT: &str = "x-ferry-subscription-selector";
/// Whether the subscription is shared. JMS makes a subscriber of the other kind with the
/// same name an error, not a replacement, whether or not a link consumes the subscription.
/// Subscriptions made before this was recorded have none, and take either kind.
const SHARED_ARGUMENT: &str = "x-ferry-subscription-shared";

/// The longest queue name 0-9-1 and 0-10 can name (a short string): a subscription whose
/// name would be longer is refused rather than made unreachable from those protocols.
const MAX_QUEUE_NAME: usize = 255;

/// The queue of the subscription that link `link` of container `container` names.
pub fn queue_name(container: &str, link: &str) -> String {
    format!("{container}_{link}")
}

/// The queue of the shared subscription link `link` of container `container` belongs to.
/// The first link of a global durable one is named as its queue (`name|global`), so a link
/// with no source finds it by that name (Qpid JMS's unsubscribe).
pub fn shared_queue_name(container: &str, link: &str, global: bool, durable: bool) -> String {
    let name = subscription_name(link);
    match (global, durable) {
        (false, true) => queue_name(container, name),
        (true, true) => format!("{name}|global"),
        (false, false) => format!("{}|volatile", queue_name(container, name)),
        (true, false) => format!("{name}|global-volatile"),
    }
}

/// The subscription a shared link belongs to: its name without the suffix Qpid JMS adds
/// (`|2`, `|global`, `|global2`, `|volatile1`, `|global-volatile1`). Any other `|` is part
/// of the name (Qpid JMS refuses `|` in subscription names; other clients may use it).
fn subscription_name(link: &str) -> &str {
    let Some((name, suffix)) = link.rsplit_once('|') else {
        return link;
    };
    let counter = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let numbered = |s: &str, prefix: &str| s.strip_prefix(prefix).is_some_and(counter);
    let added = (!suffix.is_empty() && counter(suffix))
        || numbered(suffix, "global")
        || (numbered(suffix, "volatile") || numbered(suffix, "global-volatile"))
            && suffix.bytes().last().is_some_and(|b| b.is_ascii_digit());
    if added {
        name
    } else {
        link
    }
}

fn source_of(exchange: &Exchange, key: &str) -> String {
    format!("{}/{key}", exchange.name())
}

/// What a link asks of the subscription it names.
#[derive(Clone, Copy)]
pub struct Wanted<'a> {
    pub exchange: &'a Exchange,
    pub key: &'a str,
    pub binding: &'a Arguments,
    pub selector: Option<&'a str>,
    pub lifetime: Lifetime,
    /// A shared subscription (JMS 2), which several links may consume.
    pub shared: bool,
}

/// How long a subscription's queue lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Until it is ended (a closing detach): outlives links, connections and restarts.
    Durable,
    /// Until its last link goes (a shared volatile subscription).
    WhileConsumed,
}

/// The subscription's queue, made (and bound) if there is none; one bound elsewhere or
/// with another selector is replaced, its messages dropped, unless a link consumes it
/// (JMS forbids changing a subscription in use). A queue of that name that is not a
/// subscription's, or a subscription shared where the link's is not (or the other way
/// round), is left alone and the link refused.
pub fn open(ctx: &mut Ctx, name: &str, wanted: &Wanted) -> Result<Arc<Queue>, Fault> {
    let Wanted {
        exchange,
        key,
        binding,
        selector,
        lifetime,
        shared,
    } = *wanted;
    if name.len() > MAX_QUEUE_NAME {
        return Err(Fault::new(
            condition::INVALID_FIELD,
            format!("a subscription's queue name is at most {MAX_QUEUE_NAME} bytes"),
        ));
    }
    let source = source_of(exchange, key);
    if let Some(q) = ctx.broker.queue(name) {
        if let Some(HeaderValue::Bool(was_shared)) = q.arguments().get(SHARED_ARGUMENT) {
            if *was_shared != shared {
                let (was, now) = if shared {
                    ("unshared", "shared")
                } else {
                    ("shared", "unshared")
                };
                return Err(Fault::new(
                    condition::RESOURCE_LOCKED,
                    format!("subscription {name} is {was}: it cannot be taken up {now}"),
                ));
            }
        }
        let same_selector = match (q.arguments().get(SELECTOR_ARGUMENT), selector) {
            (Some(HeaderValue::Str(was)), Some(now)) => was == now,
            (None, None) => true,
            _ => false,
        };
        match q.arguments().get(SOURCE_ARGUMENT) {
            Some(HeaderValue::Str(s)) if *s == source && same_selector => return Ok(q),
            Some(_) => {}
            None => {
                return Err(Fault::new(
                    condition::RESOURCE_LOCKED,
                    format!("queue {name} exists and is not a subscription"),
                ))
            }
        }
        if q.consumer_count() > 0 {
            return Err(Fault::new(
                condition::RESOURCE_LOCKED,
                format!("subscription {name} is in use on another topic or selector"),
            ));
        }
        delete(ctx, name, false)?;
    }
    let mut arguments = Arguments::new();
    arguments.push(SOURCE_ARGUMENT, HeaderValue::Str(source));
    arguments.push(SHARED_ARGUMENT, HeaderValue::Bool(shared));
    if let Some(selector) = selector {
        arguments.push(SELECTOR_ARGUMENT, HeaderValue::Str(selector.to_owned()));
    }
    let mut options = QueueOptions {
        durable: lifetime == Lifetime::Durable,
        // Not owned by the connection: other connections' links share it. It goes once
        // it has had a consumer and has none.
        auto_delete: lifetime == Lifetime::WhileConsumed,
        arguments,
        ..QueueOptions::default()
    };
    ctx.access.check(Action::Create, ObjectType::Queue, || {
        access::queue_props(name, &options)
    })?;
    ctx.access
        .check(Action::Bind, ObjectType::Exchange, || {
            access::binding_props(exchange.name(), Some(name), Some(key))
        })
        .map_err(Fault::from)?;
    options.quota = ctx.access.charge_queue()?;
    let (queue, _) = ctx.broker.declare_queue(name, options, false, ctx.owner)?;
    if let Err(e) = ctx.broker.bind(name, exchange.name(), key, binding) {
        let _ = ctx.broker.delete_queue(name, false, false, ctx.owner);
        return Err(e.into());
    }
    Ok(queue)
}

/// The durable subscription link `link` names, if it exists; `global`: the link asks for
/// a global shared one (its desired capabilities say so).
pub fn find(ctx: &Ctx, link: &str, global: bool) -> Option<Arc<Queue>> {
    let name = if global {
        shared_queue_name(ctx.container_id, link, true, true)
    } else {
        queue_name(ctx.container_id, link)
    };
    ctx.broker
        .queue(&name)
        .filter(|q| q.arguments().get(SOURCE_ARGUMENT).is_some())
}

/// The durable subscription a link consumes, which the client's closing detach ends.
#[derive(Debug, Clone)]
pub struct Subscribed {
    pub queue: String,
    /// Shared: other links may still consume it, and then it stays.
    pub shared: bool,
}

/// Ends the subscription: its queue goes, with what it holds (a shared one only once no
/// link consumes it). A refusal (the ACL) is the closing detach's error, so the client's
/// unsubscribe fails rather than leaving the subscription behind unheard.
pub fn end(ctx: &mut Ctx, sub: &Subscribed) -> Result<(), Fault> {
    let in_use = || {
        ctx.broker
            .queue(&sub.queue)
            .is_some_and(|q| q.consumer_count() > 0)
    };
    if sub.shared && in_use() {
        // Other links keep it: nothing is deleted, so nothing for the ACL to refuse.
        return Ok(());
    }
    match delete(ctx, &sub.queue, sub.shared) {
        Err(f) if f.condition == condition::UNAUTHORIZED_ACCESS => Err(f),
        Err(f) => {
            // Other links still consume a shared one, or it has gone already: nothing the
            // client could act on.
            tracing::debug!(subscription = %sub.queue, "subscription not ended: {}", f.text);
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

fn delete(ctx: &mut Ctx, name: &str, if_unused: bool) -> Result<(), Fault> {
    ctx.access
        .check(Action::Delete, ObjectType::Queue, || access::named(name))?;
    ctx.broker.delete_queue(name, if_unused, false, ctx.owner)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_suffixes_qpid_jms_adds_are_taken_off() {
        for (link, name) in [
            ("sub", "sub"),
            ("sub|2", "sub"),
            ("sub|global", "sub"),
            ("sub|global2", "sub"),
            ("sub|volatile1", "sub"),
            ("sub|global-volatile3", "sub"),
            ("a|b", "a|b"),
            ("a|b|2", "a|b"),
            ("a|volatile", "a|volatile"),
            ("a|", "a|"),
            ("a|globalx", "a|globalx"),
        ] {
            assert_eq!(subscription_name(link), name, "{link}");
        }
    }
}
