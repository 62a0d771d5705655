//! The encoded header a delivery sends (a 0-10 header segment, 0-9-1 properties): the
//! message's own bytes when they go out as received, which is the common case and costs
//! nothing, or bytes made for this delivery (translated from another protocol, marked
//! redelivered, with dead-letter or sequence headers added).

use std::ops::Deref;

use bytes::Bytes;

pub enum Encoded<'a> {
    AsReceived(&'a [u8]),
    Made(Bytes),
}

impl Deref for Encoded<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Encoded::AsReceived(raw) => raw,
            Encoded::Made(made) => made,
        }
    }
}
