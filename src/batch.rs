//! One array or a batch of them: the entry points take either and solve a batch.

use ndarray::{ArrayView, ArrayView1, ArrayView2, ArrayView3, Axis, Dimension, Ix2, Ix3};

/// An array that is one item (a histogram `n`, the inputs of one barycenter `K×n`) or a
/// batch of them (`B×n`, `B×K×n`), as the batch view the solvers take: one item becomes a
/// batch of one, a batch stays as it is. Implemented for `ndarray` views.
pub trait IntoBatch<'a, T, D: Dimension> {
    /// The batch view.
    fn into_batch(self) -> ArrayView<'a, T, D>;
}

impl<'a, T> IntoBatch<'a, T, Ix2> for ArrayView1<'a, T> {
    fn into_batch(self) -> ArrayView2<'a, T> {
        self.insert_axis(Axis(0))
    }
}

impl<'a, T> IntoBatch<'a, T, Ix2> for ArrayView2<'a, T> {
    fn into_batch(self) -> ArrayView2<'a, T> {
        self
    }
}

impl<'a, T> IntoBatch<'a, T, Ix3> for ArrayView2<'a, T> {
    fn into_batch(self) -> ArrayView3<'a, T> {
        self.insert_axis(Axis(0))
    }
}

impl<'a, T> IntoBatch<'a, T, Ix3> for ArrayView3<'a, T> {
    fn into_batch(self) -> ArrayView3<'a, T> {
        self
    }
}
