//! The task: addition of two `digits`-digit numbers written as text, with the answer's digits
//! reversed (least significant first, as a person adds with carries: each answer digit then
//! depends only on digits already seen, which makes the task far easier for a small model).
//!
//! `123+456=` is followed by `9750` (579 reversed, padded to `digits + 1` digits); every
//! operand is zero-padded to `digits` digits, so every problem has the same length and a batch
//! is a plain `[B, L]` array. The vocabulary is the ten digits, `+` and `=`.

use std::collections::HashSet;

/// The characters of the vocabulary; a token is its index here.
pub const VOCAB: &str = "0123456789+=";
/// The token of `+`.
const PLUS: u32 = 10;
/// The token of `=`.
const EQUALS: u32 = 11;

/// A small, fast, seedable generator (splitmix64): the data need no more.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` is small: the bias of the modulo is negligible).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The addition task's shapes and its held-out problems.
#[derive(Debug, Clone)]
pub struct Addition {
    /// Digits of each operand.
    pub digits: usize,
    /// The problems kept out of training, `(a, b)`, in a fixed order.
    pub held_out: Vec<(u64, u64)>,
    held_out_set: HashSet<(u64, u64)>,
}

impl Addition {
    /// The task with `digits`-digit operands and `n_held_out` distinct problems drawn from
    /// `rng` and kept out of training.
    pub fn new(digits: usize, n_held_out: usize, rng: &mut Rng) -> Addition {
        let limit = 10u64.pow(digits as u32);
        let mut held_out = Vec::with_capacity(n_held_out);
        let mut held_out_set = HashSet::with_capacity(n_held_out);
        while held_out.len() < n_held_out.min((limit * limit / 2) as usize) {
            let pair = (rng.below(limit), rng.below(limit));
            if held_out_set.insert(pair) {
                held_out.push(pair);
            }
        }
        Addition {
            digits,
            held_out,
            held_out_set,
        }
    }

    /// Tokens of the prompt `a+b=`.
    pub fn prompt_len(&self) -> usize {
        2 * self.digits + 2
    }

    /// Tokens of the answer (the sum's `digits + 1` digits).
    pub fn answer_len(&self) -> usize {
        self.digits + 1
    }

    /// Tokens of a whole problem.
    pub fn seq_len(&self) -> usize {
        self.prompt_len() + self.answer_len()
    }

    /// Appends the tokens of `n`'s `width` digits, most significant first.
    fn push_digits(out: &mut Vec<u32>, n: u64, width: usize) {
        let start = out.len();
        let mut n = n;
        for _ in 0..width {
            out.push((n % 10) as u32);
            n /= 10;
        }
        out[start..].reverse();
    }

    /// Appends the prompt `a+b=`.
    pub fn push_prompt(&self, out: &mut Vec<u32>, a: u64, b: u64) {
        Self::push_digits(out, a, self.digits);
        out.push(PLUS);
        Self::push_digits(out, b, self.digits);
        out.push(EQUALS);
    }

    /// The answer's tokens: `a + b`'s digits, least significant first.
    pub fn answer(&self, a: u64, b: u64) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.answer_len());
        Self::push_digits(&mut out, a + b, self.answer_len());
        out.reverse();
        out
    }

    /// A training batch of `batch` problems that are not held out: the inputs (every token
    /// but the last, `[batch, seq_len - 1]` row-major) and the targets (the answer tokens,
    /// `[batch, answer_len]`), which the model predicts from the positions
    /// `prompt_len - 1 ..` of the inputs.
    pub fn batch(&self, batch: usize, rng: &mut Rng) -> (Vec<u32>, Vec<u32>) {
        let limit = 10u64.pow(self.digits as u32);
        let mut inputs = Vec::with_capacity(batch * (self.seq_len() - 1));
        let mut targets = Vec::with_capacity(batch * self.answer_len());
        let mut made = 0;
        while made < batch {
            let pair = (rng.below(limit), rng.below(limit));
            if self.held_out_set.contains(&pair) {
                continue;
            }
            let answer = self.answer(pair.0, pair.1);
            self.push_prompt(&mut inputs, pair.0, pair.1);
            inputs.extend_from_slice(&answer[..answer.len() - 1]);
            targets.extend_from_slice(&answer);
            made += 1;
        }
        (inputs, targets)
    }

    /// A problem and an answer as text, the answer's digits as the model writes them.
    pub fn show(tokens: &[u32]) -> String {
        tokens
            .iter()
            .map(|&t| VOCAB.as_bytes().get(t as usize).map_or('?', |&c| c as char))
            .collect()
    }

    /// The number whose reversed digits are `tokens` (`?` for a token that is not a digit).
    pub fn read_reversed(tokens: &[u32]) -> String {
        let text: String = Self::show(tokens).chars().rev().collect();
        match text.trim_start_matches('0') {
            "" => "0".to_string(),
            digits => digits.to_string(),
        }
    }
}
