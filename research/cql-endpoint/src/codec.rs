//! A connection's byte stream cut into request frames: [`FrameDecoder`], the
//! [`Decoder`] that [`FramedRead`](tokio_util::codec::FramedRead) runs over the socket,
//! and the [`Budget`] of request bytes that every connection of a server shares.
//!
//! The buffer is bounded. Each 9-byte header is read as soon as it has arrived, before
//! any of its body:
//!
//! * a header that is not protocol v4, or that announces a body longer than the limit
//!   ([`CqlLimits::max_body_bytes`](crate::CqlLimits::max_body_bytes)), is an error
//!   ([`FrameError::Header`]): nothing of the announced size is allocated, and the
//!   connection answers with a protocol error and closes, since the framing cannot be
//!   trusted any more;
//! * a header whose frame would take the bytes held across connections over the budget's
//!   cap ([`CqlLimits::max_buffered_bytes`](crate::CqlLimits::max_buffered_bytes)) gives
//!   [`Inbound::Overloaded`], and its body is dropped as it arrives, never buffered;
//! * any other header reserves its frame's bytes from the budget until the request is
//!   answered, and only then does the buffer grow to hold the body.
//!
//! So a connection holds at most the frame it is receiving, whose bytes the budget
//! granted, plus what one read brings after it (a read fills only the buffer's spare
//! room, and the buffer is full only when a whole frame is in it).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

use crate::error::CqlError;
use crate::frame::{BadHeader, HEADER_LEN, Header};

/// The request bytes a server may hold, shared by its connections.
#[derive(Debug)]
pub(crate) struct Budget {
    cap: usize,
    used: AtomicUsize,
}

impl Budget {
    /// A budget of `cap` bytes, none of them used.
    pub(crate) fn new(cap: usize) -> Arc<Budget> {
        Arc::new(Budget {
            cap,
            used: AtomicUsize::new(0),
        })
    }

    /// The bytes held right now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `bytes` from the budget until the reservation is dropped; `None` if that
    /// would go over the cap.
    fn reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.cap)
            })
            .ok()?;
        Some(Reservation {
            budget: Arc::clone(self),
            bytes,
        })
    }
}

/// Bytes held against a [`Budget`], given back on drop.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// What the decoder yields.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A whole request frame. `reservation` holds its bytes against the budget: keep it
    /// until the request is answered.
    Frame {
        header: Header,
        body: BytesMut,
        reservation: Reservation,
    },
    /// A frame refused because the budget is spent: answer `stream` with `error`. Its
    /// body is skipped, and the frames after it are read as usual.
    Overloaded { stream: i16, error: CqlError },
}

/// Why the decoder stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// An unusable header: answer `stream` with the protocol error and close.
    #[error("unusable frame header: {}", bad.error())]
    Header { stream: i16, bad: BadHeader },
    /// The socket failed, or closed in the middle of a frame.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Where the decoder is in the byte stream.
#[derive(Debug)]
enum State {
    /// Before a header.
    Header,
    /// After an accepted header, whose bytes are reserved: its body is awaited.
    Body {
        header: Header,
        reservation: Reservation,
    },
    /// Inside the body of a frame refused as overloaded: this many bytes still to drop.
    Skip(usize),
}

/// The [`Decoder`] of request frames; see the [module docs](self).
#[derive(Debug)]
pub(crate) struct FrameDecoder {
    max_body: usize,
    budget: Arc<Budget>,
    state: State,
}

impl FrameDecoder {
    /// A decoder of frames whose bodies are at most `max_body` bytes, holding them
    /// against `budget`.
    pub(crate) fn new(max_body: usize, budget: Arc<Budget>) -> FrameDecoder {
        FrameDecoder {
            max_body,
            budget,
            state: State::Header,
        }
    }
}

impl Decoder for FrameDecoder {
    type Item = Inbound;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Inbound>, FrameError> {
        loop {
            match std::mem::replace(&mut self.state, State::Header) {
                State::Skip(left) => {
                    let dropped = left.min(src.len());
                    src.advance(dropped);
                    if dropped < left {
                        self.state = State::Skip(left - dropped);
                        return Ok(None);
                    }
                }
                State::Header => {
                    let Some(head) = src.first_chunk::<HEADER_LEN>() else {
                        return Ok(None);
                    };
                    let stream = i16::from_be_bytes([head[2], head[3]]);
                    let header = Header::parse(head, self.max_body)
                        .map_err(|bad| FrameError::Header { stream, bad })?;
                    src.advance(HEADER_LEN);
                    let frame = HEADER_LEN + header.length;
                    let Some(reservation) = self.budget.reserve(frame) else {
                        self.state = State::Skip(header.length);
                        let error = CqlError::Overloaded(format!(
                            "the server holds {} bytes of requests, and this frame's {frame} \
                             would go over its limit of {} bytes; try again later",
                            self.budget.used(),
                            self.budget.cap
                        ));
                        return Ok(Some(Inbound::Overloaded {
                            stream: header.stream,
                            error,
                        }));
                    };
                    // Room for the whole body, now that the budget has granted it.
                    src.reserve(header.length.saturating_sub(src.len()));
                    self.state = State::Body {
                        header,
                        reservation,
                    };
                }
                State::Body {
                    header,
                    reservation,
                } => {
                    if src.len() < header.length {
                        self.state = State::Body {
                            header,
                            reservation,
                        };
                        return Ok(None);
                    }
                    let body = src.split_to(header.length);
                    return Ok(Some(Inbound::Frame {
                        header,
                        body,
                        reservation,
                    }));
                }
            }
        }
    }
}

/// Feeds `bytes` to a [`FrameDecoder`] with the default limits, in pieces of varied
/// sizes as a socket would deliver them, decoding each frame's body and encoding the
/// error frame it would get; stops at the first unusable header. Returns how many frames
/// were read (refused ones included). For the fuzz targets.
pub(crate) fn fuzz_frames(bytes: &[u8]) -> usize {
    let limits = crate::CqlLimits::default();
    let mut decoder = FrameDecoder::new(
        limits.max_body_bytes,
        Budget::new(limits.max_buffered_bytes),
    );
    let mut buffer = BytesMut::new();
    let mut count = 0;
    let mut rest = bytes;
    let mut piece = 1;
    while !rest.is_empty() {
        let (head, tail) = rest.split_at(piece.min(rest.len()));
        buffer.extend_from_slice(head);
        rest = tail;
        piece = piece % 97 + 13;
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(Inbound::Frame { header, body, .. })) => {
                    if let Err(error) = crate::frame::decode_request(&header, &body) {
                        let _ = crate::frame::error_frame(header.stream, &error);
                    }
                    count += 1;
                }
                Ok(Some(Inbound::Overloaded { stream, error })) => {
                    let _ = crate::frame::error_frame(stream, &error);
                    count += 1;
                }
                Ok(None) => break,
                Err(_) => return count,
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUERY: u8 = 0x07;

    fn header(stream: i16, length: u32) -> Vec<u8> {
        let mut header = vec![4, 0];
        header.extend_from_slice(&stream.to_be_bytes());
        header.push(QUERY);
        header.extend_from_slice(&length.to_be_bytes());
        header
    }

    fn decoder(max_body: usize, cap: usize) -> (FrameDecoder, Arc<Budget>) {
        let budget = Budget::new(cap);
        (FrameDecoder::new(max_body, Arc::clone(&budget)), budget)
    }

    fn frame(item: Option<Inbound>) -> (Header, BytesMut, Reservation) {
        match item {
            Some(Inbound::Frame {
                header,
                body,
                reservation,
            }) => (header, body, reservation),
            other => panic!("not a frame: {other:?}"),
        }
    }

    #[test]
    fn a_partial_header_waits() {
        let (mut decoder, budget) = decoder(16, 1024);
        let whole = [header(3, 2), b"ab".to_vec()].concat();
        let mut buffer = BytesMut::from(&whole[..5]);
        assert!(decoder.decode(&mut buffer).unwrap().is_none());
        assert_eq!(buffer.len(), 5, "a partial header stays in the buffer");
        assert_eq!(
            budget.used(),
            0,
            "nothing is reserved before the header is whole"
        );
        buffer.extend_from_slice(&whole[5..]);
        let (header, body, _reservation) = frame(decoder.decode(&mut buffer).unwrap());
        assert_eq!((header.stream, header.length), (3, 2));
        assert_eq!(&body[..], b"ab");
        assert!(buffer.is_empty());
    }

    #[test]
    fn a_partial_body_waits_with_its_bytes_reserved() {
        let (mut decoder, budget) = decoder(16, 1024);
        let mut buffer = BytesMut::from(&[header(1, 10), b"0123".to_vec()].concat()[..]);
        assert!(decoder.decode(&mut buffer).unwrap().is_none());
        assert_eq!(budget.used(), HEADER_LEN + 10);
        assert!(buffer.capacity() >= 10, "room for the granted body");
        buffer.extend_from_slice(b"456789");
        buffer.extend_from_slice(&header(2, 0));
        let (header, body, reservation) = frame(decoder.decode(&mut buffer).unwrap());
        assert_eq!((header.stream, &body[..]), (1, &b"0123456789"[..]));
        let (second, empty, _second_reservation) = frame(decoder.decode(&mut buffer).unwrap());
        assert_eq!((second.stream, empty.len()), (2, 0));
        assert!(decoder.decode(&mut buffer).unwrap().is_none());
        assert_eq!(budget.used(), 2 * HEADER_LEN + 10);
        drop(reservation);
        assert_eq!(
            budget.used(),
            HEADER_LEN,
            "an answered frame gives its bytes back"
        );
    }

    #[test]
    fn a_body_of_exactly_the_limit_is_accepted() {
        let (mut decoder, _budget) = decoder(16, 1024);
        let body = [7_u8; 16];
        let mut buffer = BytesMut::from(&[header(5, 16), body.to_vec()].concat()[..]);
        let (header, read, _reservation) = frame(decoder.decode(&mut buffer).unwrap());
        assert_eq!((header.length, &read[..]), (16, &body[..]));
    }

    #[test]
    fn a_header_over_the_limit_is_refused_before_its_body() {
        for length in [17, 0x7fff_ffff, 0xffff_ffff] {
            let (mut decoder, budget) = decoder(16, usize::MAX);
            let mut buffer = BytesMut::from(&header(9, length)[..]);
            match decoder.decode(&mut buffer) {
                Err(FrameError::Header {
                    stream: 9,
                    bad: BadHeader::Length { max: 16, .. },
                }) => {}
                other => panic!("length {length}: {other:?}"),
            }
            assert!(buffer.capacity() < 1024, "nothing of the announced size");
            assert_eq!(budget.used(), 0);
        }
    }

    #[test]
    fn a_garbage_version_byte_is_refused() {
        for version in [0x00, 0x03, 0x05, b'G', 0xff] {
            let (mut decoder, _budget) = decoder(16, 1024);
            let mut bytes = header(4, 1);
            bytes[0] = version;
            let mut buffer = BytesMut::from(&bytes[..]);
            match decoder.decode(&mut buffer) {
                Err(FrameError::Header {
                    stream: 4,
                    bad: BadHeader::Version(refused),
                }) if refused == version => {}
                other => panic!("version {version:#04x}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_frame_over_the_budget_is_refused_and_skipped_as_it_arrives() {
        let (mut decoder, budget) = decoder(64, HEADER_LEN + 8);
        let mut buffer = BytesMut::from(&[header(1, 20), vec![0; 5]].concat()[..]);
        match decoder.decode(&mut buffer).unwrap() {
            Some(Inbound::Overloaded {
                stream: 1,
                error: CqlError::Overloaded(_),
            }) => {}
            other => panic!("not refused: {other:?}"),
        }
        assert!(decoder.decode(&mut buffer).unwrap().is_none());
        assert!(buffer.is_empty(), "the refused body is dropped, not kept");
        assert_eq!(budget.used(), 0);
        buffer.extend_from_slice(&[0; 15]);
        buffer.extend_from_slice(&header(2, 3));
        buffer.extend_from_slice(b"xyz");
        let (header, body, _reservation) = frame(decoder.decode(&mut buffer).unwrap());
        assert_eq!((header.stream, &body[..]), (2, &b"xyz"[..]));
    }

    #[test]
    fn fuzzing_entry_point_reads_frames_in_pieces() {
        let bytes = [
            header(1, 0),
            header(2, 200),
            vec![0; 200],
            header(3, 0),
            vec![0xff; 9],
        ]
        .concat();
        assert_eq!(fuzz_frames(&bytes), 3);
    }
}
