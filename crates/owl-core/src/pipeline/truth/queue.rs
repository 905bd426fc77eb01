//! The truth's queues of packets in flight, in fixed chunks.
//!
//! A `VecDeque` doubles its buffer when it fills and never gives it back: at 1 M packets/s and
//! a 1 s horizon, 1.05 M packets in flight sit in a buffer of 2 Mi slots, and the doubling itself
//! holds both buffers at once. Here the queue is a short ring of chunks of [`CHUNK`] slots each:
//! memory is the packets in flight rounded up to a chunk, plus one spare chunk kept for reuse,
//! and growing copies nothing.

use std::collections::VecDeque;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

/// Slots per chunk (a chunk of 40-byte records is 640 KiB).
pub const CHUNK: usize = 1 << 14;

/// A FIFO queue with random access by position from the front.
#[derive(Debug)]
pub struct ChunkedQueue<T> {
    /// Every chunk but the last holds exactly [`CHUNK`] slots.
    chunks: VecDeque<Vec<T>>,
    /// Slots of the first chunk already popped.
    head: usize,
    len: usize,
    /// An emptied chunk, kept to be filled again.
    spare: Option<Vec<T>>,
}

impl<T> Default for ChunkedQueue<T> {
    fn default() -> Self {
        ChunkedQueue {
            chunks: VecDeque::new(),
            head: 0,
            len: 0,
            spare: None,
        }
    }
}

impl<T: Copy> ChunkedQueue<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push_back(&mut self, x: T) {
        if self.chunks.back().is_none_or(|c| c.len() == CHUNK) {
            let c = self
                .spare
                .take()
                .unwrap_or_else(|| Vec::with_capacity(CHUNK));
            self.chunks.push_back(c);
        }
        self.chunks.back_mut().expect("a chunk").push(x);
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let x = self.chunks[0][self.head];
        self.head += 1;
        self.len -= 1;
        if self.head == self.chunks[0].len() {
            // the first chunk is used up: keep it as the spare (a chunk filling while the
            // queue empties is the last one too, and is reused in place)
            let mut c = self.chunks.pop_front().expect("a chunk");
            c.clear();
            self.spare = Some(c);
            self.head = 0;
        }
        Some(x)
    }

    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// The element `i` places from the front.
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let j = self.head + i;
        Some(&self.chunks[j / CHUNK][j % CHUNK])
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        let j = self.head + i;
        Some(&mut self.chunks[j / CHUNK][j % CHUNK])
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len).map(|i| self.get(i).expect("within len"))
    }

    /// Slots allocated (for tests: memory follows the packets in flight).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>()
            + self.spare.as_ref().map_or(0, Vec::capacity)
    }
}

/// The packets in flight found by identity: each slot holds a packet's position in its queue
/// (its sequence number's low 32 bits; fewer than 2³² are ever in flight), hashed by the
/// packet's id, which the queue holds. 4 bytes a slot where a map of (id, position) takes 16:
/// at 1 M packets in flight the table is 10 MiB, and its doubling holds 15 MiB at most.
#[derive(Debug, Default)]
pub struct IdIndex {
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl IdIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// The position of the packet with `id`; `id_at` gives the id at a position.
    pub fn find(&self, id: u64, id_at: impl Fn(u32) -> u64) -> Option<u32> {
        self.table
            .find(self.hasher.hash_one(id), |&q| id_at(q) == id)
            .copied()
    }

    /// Index the packet with `id` at position `seq` (not indexed yet); `id_at` gives the id at
    /// every indexed position, `seq` included.
    pub fn insert(&mut self, id: u64, seq: u32, id_at: impl Fn(u32) -> u64) {
        let h = &self.hasher;
        self.table
            .insert_unique(h.hash_one(id), seq, |&q| h.hash_one(id_at(q)));
    }

    /// Forget the packet with `id` at position `seq`.
    pub fn remove(&mut self, id: u64, seq: u32) {
        if let Ok(e) = self
            .table
            .find_entry(self.hasher.hash_one(id), |&q| q == seq)
        {
            e.remove();
        }
    }

    /// Room for `n` more packets.
    pub fn reserve(&mut self, n: usize, id_at: impl Fn(u32) -> u64) {
        let h = &self.hasher;
        self.table.reserve(n, |&q| h.hash_one(id_at(q)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Against a `VecDeque`, through fills and drains across chunk boundaries.
    #[test]
    fn it_is_a_deque() {
        let mut q = ChunkedQueue::new();
        let mut d = VecDeque::new();
        let mut x = 0u64;
        // waves: push p, pop o, for sizes around the chunk
        for (p, o) in [
            (10, 3),
            (CHUNK, CHUNK - 5),
            (3 * CHUNK + 7, CHUNK),
            (1, 2 * CHUNK),
            (CHUNK * 2, CHUNK * 3 + 100),
            (5, 10),
        ] {
            for _ in 0..p {
                q.push_back(x);
                d.push_back(x);
                x += 1;
            }
            assert_eq!(q.len(), d.len());
            for i in (0..d.len()).step_by(997) {
                assert_eq!(q.get(i), d.get(i));
            }
            let mid = d.len() / 2;
            *q.get_mut(mid).unwrap() += 1_000_000;
            d[mid] += 1_000_000;
            for _ in 0..o {
                assert_eq!(q.pop_front(), d.pop_front());
            }
            assert_eq!(q.front(), d.front());
            assert!(q.iter().eq(d.iter()));
        }
        assert_eq!(q.get(q.len()), None);
    }

    /// Allocated slots follow the elements held: at most one chunk over, and one spare.
    #[test]
    fn memory_follows_the_elements() {
        let mut q = ChunkedQueue::new();
        for i in 0..(CHUNK * 64 + 1) as u64 {
            q.push_back(i);
        }
        assert!(q.capacity() <= q.len() + 2 * CHUNK, "{}", q.capacity());
        for _ in 0..CHUNK * 60 {
            q.pop_front();
        }
        assert!(q.capacity() <= q.len() + 2 * CHUNK, "{}", q.capacity());
        // in steady state (push one, pop one) nothing more is allocated
        let cap = q.capacity();
        for i in 0..(CHUNK * 10) as u64 {
            q.push_back(i);
            q.pop_front();
        }
        assert!(q.capacity() <= cap + CHUNK, "{} then {}", cap, q.capacity());
    }

    /// Found by id through growth, removal by position, and a position reused after 2³²
    /// (its low 32 bits wrap).
    #[test]
    fn the_index_finds_what_the_queue_holds() {
        let ids: Vec<u64> = (0..100_000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let at = |q: u32| ids[q as usize];
        let mut x = IdIndex::new();
        for (q, &id) in ids.iter().enumerate() {
            assert_eq!(x.find(id, at), None);
            x.insert(id, q as u32, at);
        }
        for (q, &id) in ids.iter().enumerate().step_by(7) {
            assert_eq!(x.find(id, at), Some(q as u32));
        }
        for (q, &id) in ids.iter().enumerate().take(50_000) {
            x.remove(id, q as u32);
        }
        assert_eq!(x.find(ids[10], at), None);
        assert_eq!(x.find(ids[60_000], at), Some(60_000));
        // removing by a position that does not hold the id changes nothing
        x.remove(ids[60_001], 60_002);
        assert_eq!(x.find(ids[60_001], at), Some(60_001));
    }
}
