use super::*;
use crate::frame::{decode_frame, FrameHeader};
use crate::generated::{
    ConnectionHeartbeat, ExecutionSync, MessageAccept, MessageTransfer, QueueDeclare,
};
use crate::str::Str;
use crate::write::{write_command, write_control, write_transfer};
use bytes::BytesMut;

fn frames(mut wire: BytesMut) -> Vec<Frame> {
    let mut out = Vec::new();
    while let Some(f) = decode_frame(&mut wire, 65535).unwrap() {
        out.push(f);
    }
    assert!(wire.is_empty());
    out
}

fn frame(
    segment_type: SegmentType,
    flags: (bool, bool, bool, bool),
    payload: &'static [u8],
) -> Frame {
    let (first_segment, last_segment, first_frame, last_frame) = flags;
    Frame {
        header: FrameHeader {
            first_segment,
            last_segment,
            first_frame,
            last_frame,
            segment_type,
            track: if segment_type == SegmentType::Control {
                0
            } else {
                1
            },
            channel: 0,
            size: (payload.len() + 12) as u16,
        },
        payload: Bytes::from_static(payload),
    }
}

fn transfer_wire(body: &[u8], max_frame: usize) -> BytesMut {
    let mut out = BytesMut::new();
    let t = MessageTransfer {
        destination: Some(Str::from("amq.direct")),
        ..Default::default()
    };
    write_transfer(
        &mut out,
        0,
        &t,
        true,
        b"\x00\x00\x00\x04\x04\x01\x00\x00",
        body,
        max_frame,
    )
    .unwrap();
    out
}

fn feed(a: &mut Assembler, frames: Vec<Frame>) -> Vec<Result<Option<Incoming>, AssemblyError>> {
    frames.into_iter().map(|f| a.push(f)).collect()
}

#[test]
fn single_frame_transfer_is_zero_copy() {
    let wire = transfer_wire(b"hello", 4096);
    let fs = frames(wire);
    assert_eq!(fs.len(), 3);
    let body_ptr = fs[2].payload.as_ptr();
    let mut a = Assembler::new(1 << 20);
    let mut results = feed(&mut a, fs);
    let last = results.pop().unwrap().unwrap().unwrap();
    assert!(results.iter().all(|r| matches!(r, Ok(None))));
    let Incoming::Command {
        header,
        command,
        message_header,
        body,
        body_segment,
    } = last
    else {
        panic!("expected a command");
    };
    assert!(header.sync);
    assert!(
        matches!(command, Command::MessageTransfer(ref t) if t.destination.as_ref().is_some_and(|d| d == "amq.direct"))
    );
    assert_eq!(
        message_header.as_deref(),
        Some(&b"\x00\x00\x00\x04\x04\x01\x00\x00"[..])
    );
    assert_eq!(&body[..], b"hello");
    assert!(body_segment);
    assert_eq!(body.as_ptr(), body_ptr, "body must be a slice of the frame");
    assert!(a.is_idle());
}

#[test]
fn multi_frame_body_is_joined() {
    let body: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let fs = frames(transfer_wire(&body, 100));
    assert!(fs.len() > 10);
    let mut a = Assembler::new(1 << 20);
    let mut got = None;
    for f in fs {
        if let Some(item) = a.push(f).unwrap() {
            assert!(got.is_none());
            got = Some(item);
        }
    }
    let Some(Incoming::Command { body: b, .. }) = got else {
        panic!("no transfer")
    };
    assert_eq!(&b[..], &body[..]);
}

#[test]
fn empty_body_forms() {
    // qpidd: header segment ends the assembly.
    let mut a = Assembler::new(100);
    let r = feed(&mut a, frames(transfer_wire(b"", 4096)));
    let Ok(Some(Incoming::Command {
        body,
        message_header,
        body_segment,
        ..
    })) = &r[1]
    else {
        panic!("{r:?}")
    };
    assert!(body.is_empty() && message_header.is_some() && !body_segment);
    // Qpid Java: an empty body segment follows the header.
    let cmd = {
        let mut out = BytesMut::new();
        write_command(&mut out, 0, &MessageTransfer::default().into(), false, 4096).unwrap();
        frames(out).remove(0).payload
    };
    let mut first = frame(SegmentType::Command, (true, false, true, true), b"");
    first.payload = cmd;
    let r = feed(
        &mut a,
        vec![
            first,
            frame(SegmentType::Header, (false, false, true, true), b""),
            frame(SegmentType::Body, (false, true, true, true), b""),
        ],
    );
    assert!(
        matches!(&r[2], Ok(Some(Incoming::Command { body, body_segment: true, .. })) if body.is_empty()),
        "{r:?}"
    );
    assert!(a.is_idle());
}

#[test]
fn controls_interleave_with_a_transfer() {
    let mut fs = frames(transfer_wire(b"body", 4096));
    let mut hb = BytesMut::new();
    write_control(&mut hb, 0, &ConnectionHeartbeat {}.into()).unwrap();
    fs.insert(1, frames(hb).remove(0));
    let mut a = Assembler::new(1 << 20);
    let r = feed(&mut a, fs);
    assert!(matches!(
        r[1],
        Ok(Some(Incoming::Control(Control::ConnectionHeartbeat(_))))
    ));
    assert!(matches!(r[3], Ok(Some(Incoming::Command { .. }))));
}

#[test]
fn plain_commands_complete_in_one_segment() {
    let mut out = BytesMut::new();
    let q = QueueDeclare {
        queue: Some(Str::from("q")),
        durable: true,
        ..Default::default()
    };
    write_command(&mut out, 0, &q.clone().into(), false, 4096).unwrap();
    write_command(&mut out, 0, &ExecutionSync {}.into(), true, 4096).unwrap();
    let mut a = Assembler::new(10);
    let r = feed(&mut a, frames(out));
    assert_eq!(
        r[0],
        Ok(Some(Incoming::Command {
            header: CommandHeader::sync(false),
            command: q.into(),
            message_header: None,
            body: Bytes::new(),
            body_segment: false,
        }))
    );
    assert!(matches!(&r[1], Ok(Some(Incoming::Command { header, .. })) if header.sync));
}

#[test]
fn framing_errors() {
    use SegmentType::*;
    let cases: Vec<(Vec<Frame>, FrameError)> = vec![
        (
            vec![frame(
                Command,
                (true, true, false, true),
                b"\x03\x01\x01\x00\x00\x00",
            )],
            FrameError::FrameOrder("continuation without a first frame"),
        ),
        (
            vec![
                frame(Command, (true, true, true, false), b"\x03\x01"),
                frame(Command, (true, true, true, true), b"\x01\x00\x00\x00"),
            ],
            FrameError::FrameOrder("first frame inside a segment"),
        ),
        (
            vec![
                frame(Command, (true, true, true, false), b"\x03\x01"),
                frame(Command, (true, false, false, true), b"\x01\x00\x00\x00"),
            ],
            FrameError::FrameOrder("segment flags changed mid-segment"),
        ),
        (
            vec![frame(Body, (true, true, true, true), b"x")],
            FrameError::SegmentOrder("header or body without a command"),
        ),
        (
            vec![frame(
                Command,
                (false, true, true, true),
                b"\x03\x01\x01\x00\x00\x00",
            )],
            FrameError::SegmentOrder("assembly must start with a first segment"),
        ),
        (
            vec![frame(
                Control,
                (true, false, true, true),
                b"\x01\x0a\x00\x00",
            )],
            FrameError::SegmentOrder("a control is a single segment"),
        ),
        (
            vec![
                frame(
                    Command,
                    (true, false, true, true),
                    b"\x04\x01\x01\x00\x00\x00",
                ),
                frame(
                    Command,
                    (true, true, true, true),
                    b"\x03\x01\x01\x00\x00\x00",
                ),
            ],
            FrameError::SegmentOrder("new assembly before the last one ended"),
        ),
        (
            vec![
                frame(
                    Command,
                    (true, false, true, true),
                    b"\x04\x01\x01\x00\x00\x00",
                ),
                frame(Header, (false, false, true, true), b""),
                frame(Header, (false, true, true, true), b""),
            ],
            FrameError::SegmentOrder("second header segment"),
        ),
        (
            vec![
                frame(
                    Command,
                    (true, false, true, true),
                    b"\x04\x01\x01\x00\x00\x00",
                ),
                frame(Body, (false, false, true, true), b""),
            ],
            FrameError::SegmentOrder("body segment must end the assembly"),
        ),
    ];
    for (fs, expected) in cases {
        let mut a = Assembler::new(100);
        let results = feed(&mut a, fs);
        assert_eq!(
            results.last().cloned().unwrap(),
            Err(AssemblyError::Framing(expected.clone())),
            "{expected:?}"
        );
    }
    let mut wrong_track = frame(SegmentType::Command, (true, true, true, true), b"");
    wrong_track.header.track = 0;
    assert_eq!(
        Assembler::new(1).push(wrong_track),
        Err(AssemblyError::Framing(FrameError::Track(0)))
    );
}

#[test]
fn oversized_command_segment_is_a_framing_error() {
    let mut a = Assembler::new(100).with_max_command_size(8);
    let r = a.push(frame(
        SegmentType::Command,
        (true, true, true, true),
        b"\x03\x01\x01\x00\x00\x00\x00\x00\x00",
    ));
    assert!(matches!(
        r,
        Err(AssemblyError::Framing(FrameError::SegmentTooLarge { .. }))
    ));
}

#[test]
fn bad_command_reports_codes_and_skips_its_segments() {
    use SegmentType::*;
    let mut a = Assembler::new(100);
    let r = feed(
        &mut a,
        vec![
            // message.transfer with an accept-mode of 9 and a header and body following.
            frame(
                Command,
                (true, false, true, true),
                b"\x04\x01\x01\x00\x02\x00\x09",
            ),
            frame(Header, (false, false, true, true), b"hdr"),
            frame(Body, (false, true, true, false), b"bo"),
            frame(Body, (false, true, false, true), b"dy"),
            frame(
                Command,
                (true, true, true, true),
                b"\x03\x01\x01\x00\x00\x00",
            ),
        ],
    );
    let Err(AssemblyError::Command(e)) = &r[0] else {
        panic!("{r:?}")
    };
    assert_eq!((e.class_code, e.code), (Some(4), Some(1)));
    let CommandErrorKind::Decode(d) = &e.error else {
        panic!()
    };
    assert_eq!(d.field_index(), Some(1));
    assert_eq!(
        d.root(),
        &DecodeError::InvalidEnum {
            domain: "message.accept-mode",
            value: 9
        }
    );
    assert!(r[1..4].iter().all(|x| matches!(x, Ok(None))), "{r:?}");
    assert!(matches!(r[4], Ok(Some(Incoming::Command { .. }))));

    let r = Assembler::new(1).push(frame(
        Command,
        (true, true, true, true),
        b"\x09\xee\x01\x00\x00\x00",
    ));
    assert_eq!(
        r,
        Err(AssemblyError::Command(CommandError {
            class_code: Some(9),
            code: Some(0xee),
            error: CommandErrorKind::Decode(DecodeError::UnknownCommand {
                class_code: 9,
                code: 0xee
            }),
        }))
    );
    let r = Assembler::new(1).push(frame(Command, (true, true, true, true), b"\x09"));
    assert!(matches!(
        r,
        Err(AssemblyError::Command(CommandError {
            class_code: Some(9),
            code: None,
            ..
        }))
    ));
}

#[test]
fn bad_control_is_reported_as_control() {
    let r = Assembler::new(1).push(frame(
        SegmentType::Control,
        (true, true, true, true),
        b"\x01\x7f\x00\x00",
    ));
    assert_eq!(
        r,
        Err(AssemblyError::Control(DecodeError::UnknownControl {
            class_code: 1,
            code: 0x7f
        }))
    );
}

#[test]
fn message_size_limit() {
    let fs = frames(transfer_wire(&[1u8; 300], 100));
    let mut a = Assembler::new(200);
    let results = feed(&mut a, fs);
    let errors: Vec<_> = results.iter().filter(|r| r.is_err()).collect();
    assert_eq!(errors.len(), 1, "{results:?}");
    assert!(matches!(
        errors[0],
        Err(AssemblyError::Command(CommandError {
            class_code: Some(4),
            code: Some(1),
            error: CommandErrorKind::MessageTooLarge { limit: 200, .. }
        }))
    ));
    assert!(results.iter().all(|r| !matches!(r, Ok(Some(_)))));
    assert!(a.is_idle());
    // The assembler carries on with the next command.
    let mut out = BytesMut::new();
    write_command(&mut out, 0, &MessageAccept::default().into(), false, 4096).unwrap();
    assert!(matches!(
        a.push(frames(out).remove(0)),
        Ok(Some(Incoming::Command { .. }))
    ));
}

#[test]
fn a_message_too_large_at_its_last_frame_still_ends_the_assembly() {
    // One body frame: the limit is crossed on the frame that ends the segment.
    let fs = frames(transfer_wire(&[1u8; 300], 4096));
    let mut a = Assembler::new(200);
    let results = feed(&mut a, fs);
    assert!(
        matches!(
            results.last(),
            Some(Err(AssemblyError::Command(CommandError {
                error: CommandErrorKind::MessageTooLarge { limit: 200, .. },
                ..
            })))
        ),
        "{results:?}"
    );
    assert!(a.is_idle());
}
