//! One instruction-set dispatch for the CPU kernels: a kernel is written once, generic over
//! [`MulAdd`](crate::real::MulAdd), and [`isa_dispatch!`] compiles it for AVX-512F and for
//! AVX2 + FMA (x86-64, chosen at run time; std caches the detection) with hardware FMA, and
//! portably (separate multiply and add; hardware FMA on aarch64, where it is baseline).

/// The instruction sets a kernel can be compiled for, in increasing order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Isa {
    /// No target features beyond the baseline.
    Portable,
    /// AVX2 and FMA (x86-64).
    Avx2Fma,
    /// AVX-512F (which implies AVX2 and FMA): 16 f32 or 8 f64 lanes per instruction.
    Avx512,
}

impl Isa {
    /// The best instruction set, up to `max`, that this CPU has.
    #[inline]
    pub(crate) fn detect(max: Isa) -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if max >= Isa::Avx512 && std::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if max >= Isa::Avx2Fma
                && std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
            {
                return Isa::Avx2Fma;
            }
        }
        let _ = max;
        Isa::Portable
    }

    /// Every instruction set up to `max` that this CPU has (for tests comparing them).
    #[cfg(test)]
    pub(crate) fn available(max: Isa) -> Vec<Isa> {
        [Isa::Portable, Isa::Avx2Fma, Isa::Avx512]
            .into_iter()
            .filter(|&isa| isa <= Isa::detect(max))
            .collect()
    }
}

/// Define `fn NAME(args) -> R` that runs `KERNEL::<generics…, M>` compiled for the best
/// instruction set, up to `AVX512` or `AVX2`, that the CPU has (`M` = `HwFma` there,
/// `NoFma` in the portable build; `HwFma` on aarch64):
///
/// ```ignore
/// isa_dispatch! {
///     /// Documentation of `lse`.
///     pub fn lse<T: Real>(pot: &[T], cost: &[T], inv_eps: T) -> T = lse_kernel up to AVX2;
/// }
/// ```
///
/// With `fn NAME[NAME_ON]…`, also `fn NAME_ON(isa: Isa, args) -> R`, which runs the
/// variant of `isa` (or the best the CPU has below it), for tests comparing the variants.
macro_rules! isa_dispatch {
    (@on [] $($rest:tt)*) => {};
    (@on [$on:ident] $max:ident, $kernel:ident [$($g:ident : $bound:path),*]
        ($($arg:ident : $ty:ty),*) $(-> $ret:ty)?) => {
        #[allow(dead_code, clippy::too_many_arguments)]
        fn $on<$($g: $bound),*>(isa: $crate::backend::cpu::isa::Isa, $($arg: $ty),*) $(-> $ret)? {
            let best = $crate::backend::cpu::isa::Isa::detect(
                $crate::backend::cpu::isa::isa_dispatch!(@max $max));
            $crate::backend::cpu::isa::isa_dispatch!(@body $max, isa.min(best),
                $kernel [$($g: $bound),*] ($($arg: $ty),*) $(-> $ret)?)
        }
    };
    (@max AVX512) => { $crate::backend::cpu::isa::Isa::Avx512 };
    (@max AVX2) => { $crate::backend::cpu::isa::Isa::Avx2Fma };
    // The variant for `$isa`, which must be at most what the CPU has.
    (@body $max:ident, $isa:expr, $kernel:ident [$($g:ident : $bound:path),*]
        ($($arg:ident : $ty:ty),*) $(-> $ret:ty)?) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? {
                $kernel::<$($g,)* $crate::real::HwFma>($($arg),*)
            }
            $crate::backend::cpu::isa::isa_dispatch!(@x86 $max, $isa, avx2,
                $kernel [$($g: $bound),*] ($($arg: $ty),*) $(-> $ret)?)
        }
        #[cfg(target_arch = "aarch64")]
        {
            let _ = $isa;
            $kernel::<$($g,)* $crate::real::HwFma>($($arg),*)
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            let _ = $isa;
            $kernel::<$($g,)* $crate::real::NoFma>($($arg),*)
        }
    }};
    (@x86 AVX512, $isa:expr, $avx2:ident, $kernel:ident [$($g:ident : $bound:path),*]
        ($($arg:ident : $ty:ty),*) $(-> $ret:ty)?) => {{
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn avx512<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? {
            $kernel::<$($g,)* $crate::real::HwFma>($($arg),*)
        }
        match $isa {
            // SAFETY: the CPU has AVX-512F, AVX2 and FMA (`Isa::detect` saw them).
            $crate::backend::cpu::isa::Isa::Avx512 => unsafe { avx512::<$($g),*>($($arg),*) },
            // SAFETY: the CPU has AVX2 and FMA (`Isa::detect` saw them).
            $crate::backend::cpu::isa::Isa::Avx2Fma => unsafe { $avx2::<$($g),*>($($arg),*) },
            $crate::backend::cpu::isa::Isa::Portable => {
                $kernel::<$($g,)* $crate::real::NoFma>($($arg),*)
            }
        }
    }};
    (@x86 AVX2, $isa:expr, $avx2:ident, $kernel:ident [$($g:ident : $bound:path),*]
        ($($arg:ident : $ty:ty),*) $(-> $ret:ty)?) => {
        match $isa {
            // SAFETY: the CPU has AVX2 and FMA (`Isa::detect` saw them; up to AVX2 it
            // reports nothing higher).
            $crate::backend::cpu::isa::Isa::Avx512 | $crate::backend::cpu::isa::Isa::Avx2Fma => {
                unsafe { $avx2::<$($g),*>($($arg),*) }
            }
            $crate::backend::cpu::isa::Isa::Portable => {
                $kernel::<$($g,)* $crate::real::NoFma>($($arg),*)
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident $([$on:ident])? $(<$($g:ident : $bound:path),+>)?
            ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)?
            = $kernel:ident up to $max:ident;
    ) => {
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name $(<$($g: $bound),+>)? ($($arg: $ty),*) $(-> $ret)? {
            $crate::backend::cpu::isa::isa_dispatch!(@body $max,
                $crate::backend::cpu::isa::Isa::detect(
                    $crate::backend::cpu::isa::isa_dispatch!(@max $max)),
                $kernel [$($($g: $bound),+)?] ($($arg: $ty),*) $(-> $ret)?)
        }
        $crate::backend::cpu::isa::isa_dispatch!(@on [$($on)?] $max,
            $kernel [$($($g: $bound),+)?] ($($arg: $ty),*) $(-> $ret)?);
    };
}
pub(crate) use isa_dispatch;
