//! Which adapter the device opens: the one rule, over plain descriptions of the adapters wgpu
//! enumerates (so it is testable without a GPU).
//!
//! [`GpuOptions::adapter_name`](crate::GpuOptions) (`LUCENT_ADAPTER`) is either
//! - unset / empty: the best adapter (discrete, integrated, virtual, other, then CPU ones; Vulkan
//!   before other backends; the enumeration order among equals);
//! - `#N` (N a decimal index): the N-th adapter of wgpu's enumeration, counted from 0, as
//!   [`adapters`](crate::adapters) lists them (the addon's `adapters()`, the error message of a
//!   failed choice). Identical GPUs have the same name; the index tells them apart, so a host with
//!   several runs one worker per adapter (`#0`, `#1` ...). The enumeration order is the driver's
//!   and stays the same between runs on one host with the same devices;
//! - anything else: a case-insensitive substring of the adapter name, the best match winning.
//!
//! A CPU adapter (lavapipe, llvmpipe, SwiftShader) is chosen only with `allow_cpu`
//! (`LUCENT_GPU_ALLOW_CPU=1`, always for `backend: gpu`): a name filter skips CPU adapters
//! otherwise; an index naming one is refused. Failures are `gpu_unavailable` (a configuration
//! error: 100500005 at the API), a malformed `#` form `invalid_argument`; the message lists
//! every adapter with its index.

use lucent_core::error::{Code, Error, Result};

/// One adapter as wgpu enumerates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterDesc {
    /// The driver's device name (`llvmpipe (LLVM 19.1.7, 256 bits)`, `NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// wgpu's backend: `Vulkan`, `Metal`, `Dx12`.
    pub backend: String,
    /// `discrete`, `integrated`, `virtual`, `cpu` or `other`.
    pub device_type: String,
}

impl AdapterDesc {
    fn is_cpu(&self) -> bool {
        self.device_type == "cpu"
    }
}

/// What `adapter_name` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdapterPick {
    Best,
    /// Lowercased name substring.
    Name(String),
    Index(usize),
}

impl AdapterPick {
    /// `None` / `""`: [`AdapterPick::Best`]; `#N`: an index (`#` followed by anything but a
    /// decimal number: invalid_argument); else a name substring.
    pub fn parse(s: Option<&str>) -> Result<AdapterPick> {
        let s = s.map(str::trim).unwrap_or("");
        if s.is_empty() {
            return Ok(AdapterPick::Best);
        }
        match s.strip_prefix('#') {
            Some(n) => n
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|_| n.trim().bytes().all(|b| b.is_ascii_digit()))
                .map(AdapterPick::Index)
                .ok_or_else(|| Error::new(Code::InvalidArgument, format!("adapter '{s}': expected #N (an adapter index, 0 the first) or a name substring"))),
            None => Ok(AdapterPick::Name(s.to_lowercase())),
        }
    }
}

/// `#0 name (Vulkan) [cpu], #1 ...`: every adapter with its index, for messages.
pub fn describe(list: &[AdapterDesc]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter().enumerate().map(|(i, a)| format!("#{i} {} ({}) [{}]", a.name, a.backend, a.device_type)).collect::<Vec<_>>().join(", ")
}

/// The index into `list` of the adapter `pick` chooses, or why none.
pub fn select_adapter(list: &[AdapterDesc], pick: &AdapterPick, allow_cpu: bool) -> Result<usize> {
    let unavailable = |why: String| Err(Error::new(Code::GpuUnavailable, format!("{why}; adapters: {}", describe(list))));
    let cpu_rule = if allow_cpu { "allowed" } else { "not allowed (LUCENT_GPU_ALLOW_CPU=1 allows them)" };
    match pick {
        AdapterPick::Index(n) => match list.get(*n) {
            None => unavailable(format!("adapter #{n} out of range: {} adapter(s), #0 the first", list.len())),
            Some(a) if a.is_cpu() && !allow_cpu => unavailable(format!("adapter #{n} ({}) is a CPU adapter: {cpu_rule}", a.name)),
            Some(_) => Ok(*n),
        },
        AdapterPick::Best | AdapterPick::Name(_) => {
            let rank = |a: &AdapterDesc| {
                let t = match a.device_type.as_str() {
                    "discrete" => 0,
                    "integrated" => 1,
                    "virtual" => 2,
                    "cpu" => 4,
                    _ => 3,
                };
                (t, if a.backend == "Vulkan" { 0 } else { 1 })
            };
            let want = match pick {
                AdapterPick::Name(w) => Some(w.as_str()),
                _ => None,
            };
            // min_by_key keeps the first of equals: the enumeration order decides among them.
            let best = list
                .iter()
                .enumerate()
                .filter(|(_, a)| (allow_cpu || !a.is_cpu()) && want.is_none_or(|w| a.name.to_lowercase().contains(w)))
                .min_by_key(|(_, a)| rank(a))
                .map(|(i, _)| i);
            match best {
                Some(i) => Ok(i),
                None => unavailable(format!("no usable GPU adapter (name filter {want:?}, cpu adapters {cpu_rule})")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(name: &str, backend: &str, t: &str) -> AdapterDesc {
        AdapterDesc { name: name.into(), backend: backend.into(), device_type: t.into() }
    }

    /// Two identical GPUs, a CPU adapter between them, and the first GPU again on another backend.
    fn host() -> Vec<AdapterDesc> {
        vec![
            a("NVIDIA H100 80GB HBM3", "Vulkan", "discrete"),
            a("llvmpipe (LLVM 19.1.7, 256 bits)", "Vulkan", "cpu"),
            a("NVIDIA H100 80GB HBM3", "Vulkan", "discrete"),
            a("Intel(R) Graphics", "Dx12", "integrated"),
        ]
    }

    #[test]
    fn parse_forms() {
        assert_eq!(AdapterPick::parse(None).unwrap(), AdapterPick::Best);
        assert_eq!(AdapterPick::parse(Some("  ")).unwrap(), AdapterPick::Best);
        assert_eq!(AdapterPick::parse(Some("#0")).unwrap(), AdapterPick::Index(0));
        assert_eq!(AdapterPick::parse(Some(" #12 ")).unwrap(), AdapterPick::Index(12));
        assert_eq!(AdapterPick::parse(Some("H100")).unwrap(), AdapterPick::Name("h100".into()));
        for bad in ["#", "#x", "#-1", "#+1", "#1.5", "#1a", "#99999999999999999999999"] {
            assert_eq!(AdapterPick::parse(Some(bad)).unwrap_err().code, Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn index_tells_identical_gpus_apart() {
        let l = host();
        assert_eq!(select_adapter(&l, &AdapterPick::Index(0), false).unwrap(), 0);
        assert_eq!(select_adapter(&l, &AdapterPick::Index(2), false).unwrap(), 2);
        // A name matches both: the first in enumeration order, always the same one.
        assert_eq!(select_adapter(&l, &AdapterPick::Name("h100".into()), false).unwrap(), 0);
        assert_eq!(select_adapter(&l, &AdapterPick::Index(3), false).unwrap(), 3, "an index takes a lesser type too");
    }

    #[test]
    fn index_out_of_range_and_cpu_adapters() {
        let l = host();
        let e = select_adapter(&l, &AdapterPick::Index(4), true).unwrap_err();
        assert_eq!(e.code, Code::GpuUnavailable);
        assert!(e.message.contains("#4 out of range: 4 adapter(s)"), "{}", e.message);
        assert!(e.message.contains("#2 NVIDIA H100 80GB HBM3 (Vulkan) [discrete]"), "the list names every index: {}", e.message);
        let e = select_adapter(&l, &AdapterPick::Index(1), false).unwrap_err();
        assert_eq!(e.code, Code::GpuUnavailable);
        assert!(e.message.contains("#1 (llvmpipe") && e.message.contains("CPU adapter"), "{}", e.message);
        assert_eq!(select_adapter(&l, &AdapterPick::Index(1), true).unwrap(), 1);
        assert_eq!(select_adapter(&[], &AdapterPick::Index(0), true).unwrap_err().code, Code::GpuUnavailable);
    }

    #[test]
    fn best_and_name_rules() {
        let l = host();
        assert_eq!(select_adapter(&l, &AdapterPick::Best, false).unwrap(), 0);
        assert_eq!(select_adapter(&l, &AdapterPick::Name("intel".into()), false).unwrap(), 3);
        // A name that only a CPU adapter matches: refused without allow_cpu, taken with it.
        assert_eq!(select_adapter(&l, &AdapterPick::Name("llvmpipe".into()), false).unwrap_err().code, Code::GpuUnavailable);
        assert_eq!(select_adapter(&l, &AdapterPick::Name("llvmpipe".into()), true).unwrap(), 1);
        let cpu_only = vec![a("llvmpipe", "Vulkan", "cpu")];
        assert!(select_adapter(&cpu_only, &AdapterPick::Best, false).is_err());
        assert_eq!(select_adapter(&cpu_only, &AdapterPick::Best, true).unwrap(), 0);
        // Vulkan before another backend of the same type.
        let two = vec![a("X", "Dx12", "discrete"), a("X", "Vulkan", "discrete")];
        assert_eq!(select_adapter(&two, &AdapterPick::Best, false).unwrap(), 1);
    }
}
