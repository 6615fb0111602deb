//! The tensor-core operands of f32 clouds above `PC_DMAX` dimensions: the cross-term
//! kernel a cloud uses ([`CrossKernel`]), its split TF32 operands and their layout.

use super::*;

/// How a half-step forms the cross term `x·y` of the dot-product form (`d > PC_DMAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CrossKernel {
    /// Exact FMA products (`pc_sinkstep_dn`, f32 and f64).
    Fma,
    /// One TF32 MMA per product (`pc_sinkstep_tc`, f32).
    Tf32,
    /// Split TF32, three MMAs per product (`pc_sinkstep_tc3`, f32).
    Tf32x3,
}

impl CrossKernel {
    /// The kernel for a cloud of dimension `d` in precision `p` with the user's choice:
    /// tensor cores only for f32 above `PC_DMAX` dimensions (below, the exact difference
    /// form is cheap; f64 has no TF32 path).
    pub(super) fn of(precision: CrossPrecision, p: Precision, d: usize) -> CrossKernel {
        if p != Precision::F32 || d <= PC_DMAX {
            return CrossKernel::Fma;
        }
        match precision {
            CrossPrecision::Exact => CrossKernel::Fma,
            CrossPrecision::Tf32 => CrossKernel::Tf32,
            CrossPrecision::Tf32x3 => CrossKernel::Tf32x3,
        }
    }
}

/// The two clouds as TF32 operands (`pc_tc_split`): point-major, `dp` coordinates per point
/// (`d` rounded up to `PC_TC_DC`, zero-padded), the TF32 rounding of each coordinate and,
/// for [`CrossKernel::Tf32x3`], the TF32 rounding of what it leaves.
pub(super) struct TcOperands<T> {
    pub(super) kernel: CrossKernel,
    pub(super) dp: usize,
    pub(super) x: (CudaSlice<T>, Option<CudaSlice<T>>),
    pub(super) y: (CudaSlice<T>, Option<CudaSlice<T>>),
}

impl<T> TcOperands<T> {
    /// `(output big, output small, reduced big, reduced small)` of a half-step on `side`;
    /// the small parts are the big ones when there are none (then unread).
    pub(super) fn sides(&self, side: Side) -> [&CudaSlice<T>; 4] {
        let (o, r) = match side {
            Side::Col => (&self.y, &self.x),
            Side::Row => (&self.x, &self.y),
        };
        [
            &o.0,
            o.1.as_ref().unwrap_or(&o.0),
            &r.0,
            r.1.as_ref().unwrap_or(&r.0),
        ]
    }
}

impl CudaBackend {
    /// The TF32 parts of `pairs` structure-of-arrays clouds of `len` points each, stored one
    /// after the other (`pc_tc_split`): point-major, `dp` coordinates each, in the same order;
    /// the second part only for `x3`.
    pub(super) fn tc_split<T: CudaReal>(
        &self,
        pts: &CudaSlice<T>,
        (len, pairs): (usize, usize),
        d: usize,
        dp: usize,
        x3: bool,
        what: &str,
    ) -> Result<(CudaSlice<T>, Option<CudaSlice<T>>)> {
        let total = len
            .checked_mul(dp)
            .and_then(|t| t.checked_mul(pairs))
            .filter(|&t| i64::try_from(t).is_ok())
            .ok_or_else(|| Error::shape("x", format!("{len} points of {dp} coordinates")))?;
        let big = self.alloc::<T>(total, what)?;
        let small = if x3 {
            Some(self.alloc::<T>(total, what)?)
        } else {
            None
        };
        let psmall = small.as_ref().map_or(self.ptr(&big), |v| self.ptr(v));
        let blocks = self.stride_blocks(total, 256, 8);
        // SAFETY: pc_tc_split(pts, big, small, len, d, dp, x3, B) reads B·len·d coordinates
        // and writes B·len·dp values to big (and to small when x3).
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_tc_split"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(pts),
                    self.ptr(&big),
                    psmall,
                    to_i32(len, "x")?,
                    to_i32(d, "x")?,
                    to_i32(dp, "x")?,
                    x3 as i32,
                    to_i32(pairs, "x")?,
                ),
            )
        }?;
        Ok((big, small))
    }

    /// `(resident, shared bytes)` of the tensor-core half-step on `tc`: the output tile (of
    /// both parts with TF32x3) stays in shared memory for the whole reduction when it takes at
    /// most `TC_RESIDENT_BYTES` (and fits), else it is streamed by chunks in two slots like
    /// the reduced tile. Layout as `pc_sinkstep_tc_body`: A tile, two slots of B chunks, and
    /// two stages of column terms and norms.
    pub(super) fn tc_layout<T>(&self, tc: &TcOperands<T>, size: usize) -> (bool, usize) {
        let parts = if tc.kernel == CrossKernel::Tf32x3 {
            2
        } else {
            1
        };
        let chunks = tc.dp / PC_TC_DC;
        let a_chunk = parts * PC_TC_BL * PC_TC_DC * size;
        let rest = (2 * parts * PC_TC_BK * PC_TC_DC + 4 * PC_TC_BK) * size;
        let resident =
            a_chunk * chunks <= TC_RESIDENT_BYTES && a_chunk * chunks + rest <= self.inner.max_smem;
        let a = a_chunk * if resident { chunks } else { 2 };
        (resident, a + rest)
    }
}
