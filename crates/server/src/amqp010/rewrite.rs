//! Header segments re-encoded on delivery with headers the broker adds (dead letters'
//! history, sequence numbers, traces): only messages that carry such additions pay.

use bytes::{Bytes, BytesMut};
use ferry_amqp010::{DeliveryProperties, Map, MessageHeader};

/// `segment` decoded, changed by `edit` (given delivery-properties, if any, and the
/// application headers, made if missing), and encoded again with `room` octets to spare;
/// `None` if `edit` says it changed nothing, or if the segment does not decode (it always
/// does: the broker decoded or built it).
pub fn edit_header(
    segment: &Bytes,
    room: usize,
    edit: impl FnOnce(Option<&mut DeliveryProperties>, &mut Map) -> bool,
) -> Option<Bytes> {
    let mut header = MessageHeader::decode(segment.clone()).ok()?;
    let mp = header.properties.get_or_insert_with(Default::default);
    let headers = mp.application_headers.get_or_insert_with(Map::new);
    if !edit(header.delivery.as_mut(), headers) {
        return None;
    }
    let mut out = BytesMut::with_capacity(segment.len() + room);
    header.encode(&mut out).ok()?;
    Some(out.freeze())
}
