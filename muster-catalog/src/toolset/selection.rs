//! A selection of tools of one catalogue snapshot: a bit per tool, by catalogue index.

/// Which tools of a snapshot are selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    bits: Vec<u64>,
    len: usize,
}

impl Selection {
    /// Nothing of `len` tools.
    pub fn none(len: usize) -> Self {
        Self {
            bits: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Every one of `len` tools.
    pub fn all(len: usize) -> Self {
        let mut s = Self::none(len);
        for i in 0..len {
            s.insert(i);
        }
        s
    }

    /// Selects tool `i`.
    pub fn insert(&mut self, i: usize) {
        if i < self.len {
            self.bits[i / 64] |= 1 << (i % 64);
        }
    }

    /// Whether tool `i` is selected.
    pub fn contains(&self, i: usize) -> bool {
        i < self.len && self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// Adds every tool of `other`.
    pub fn union_with(&mut self, other: &Self) {
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a |= b;
        }
    }

    /// Keeps only tools also in `other`.
    pub fn intersect_with(&mut self, other: &Self) {
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a &= b;
        }
    }

    /// Removes every tool of `other`.
    pub fn subtract(&mut self, other: &Self) {
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a &= !b;
        }
    }

    /// How many tools are selected.
    pub fn count(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether nothing is selected.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|w| *w == 0)
    }

    /// The selected indices, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len).filter(|&i| self.contains(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations_follow_their_names() {
        let mut a = Selection::none(130);
        a.insert(0);
        a.insert(64);
        a.insert(129);
        a.insert(500); // out of range: ignored
        let mut b = Selection::none(130);
        b.insert(64);
        b.insert(100);
        let mut u = a.clone();
        u.union_with(&b);
        assert_eq!(u.iter().collect::<Vec<_>>(), [0, 64, 100, 129]);
        let mut i = a.clone();
        i.intersect_with(&b);
        assert_eq!(i.iter().collect::<Vec<_>>(), [64]);
        let mut d = a.clone();
        d.subtract(&b);
        assert_eq!((d.count(), d.contains(64)), (2, false));
        assert_eq!(Selection::all(70).count(), 70);
        assert!(Selection::none(3).is_empty());
    }
}
