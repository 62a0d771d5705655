//! Durable subscriptions (a JMS durable subscriber over 1.0): a link to an exchange whose
//! source is durable (or never expires) gets a durable queue named after the client's
//! container id and the link's name, bound to the exchange. The queue outlives the link, the
//! connection and a restart, collecting what the exchange routes to it; attaching a link of
//! the same name from the same container resumes it, and a detach with `closed` set ends it.
//! A link with no source asks whether such a subscription exists (how Qpid JMS
//! unsubscribes: it attaches, then closes the link). A selector is part of the
//! subscription: another one replaces it, and its consumer drops what it does not match.

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

/// The longest queue name 0-9-1 and 0-10 can name (a short string): a subscription whose
/// name would be longer is refused rather than made unreachable from those protocols.
const MAX_QUEUE_NAME: usize = 255;

/// The queue of the subscription that link `link` of container `container` names.
pub fn queue_name(container: &str, link: &str) -> String {
    format!("{container}_{link}")
}

fn source_of(exchange: &Exchange, key: &str) -> String {
    format!("{}/{key}", exchange.name())
}

/// The subscription's queue, made (and bound) if there is none; one bound elsewhere or
/// with another selector is replaced, its messages dropped, unless a link consumes it
/// (JMS forbids changing a subscription in use). A queue of that name that is not a
/// subscription's is left alone and the link refused.
pub fn open(
    ctx: &mut Ctx,
    name: &str,
    exchange: &Exchange,
    key: &str,
    binding: &Arguments,
    selector: Option<&str>,
) -> Result<Arc<Queue>, Fault> {
    if name.len() > MAX_QUEUE_NAME {
        return Err(Fault::new(
            condition::INVALID_FIELD,
            format!("a subscription's queue name is at most {MAX_QUEUE_NAME} bytes"),
        ));
    }
    let source = source_of(exchange, key);
    if let Some(q) = ctx.broker.queue(name) {
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
        end(ctx, name)?;
    }
    let mut arguments = Arguments::new();
    arguments.push(SOURCE_ARGUMENT, HeaderValue::Str(source));
    if let Some(selector) = selector {
        arguments.push(SELECTOR_ARGUMENT, HeaderValue::Str(selector.to_owned()));
    }
    let mut options = QueueOptions {
        durable: true,
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

/// The subscription link `link` names, if it exists.
pub fn find(ctx: &Ctx, link: &str) -> Option<Arc<Queue>> {
    ctx.broker
        .queue(&queue_name(ctx.container_id, link))
        .filter(|q| q.arguments().get(SOURCE_ARGUMENT).is_some())
}

/// Ends the subscription: its queue goes, with what it holds.
pub fn end(ctx: &mut Ctx, name: &str) -> Result<(), Fault> {
    ctx.access
        .check(Action::Delete, ObjectType::Queue, || access::named(name))?;
    ctx.broker.delete_queue(name, false, false, ctx.owner)?;
    Ok(())
}
