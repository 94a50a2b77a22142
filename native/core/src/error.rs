//! The one table of engine error codes. Every failure that leaves the native engine carries one of
//! these stable codes; the napi layer passes the code string through unchanged and the gateway maps
//! it to the API's `error_code` (server/errors.ts). Add a code here, nowhere else.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    UnsupportedFormat,
    ImageTooLarge,
    DecodeFailed,
    EncodeFailed,
    GpuUnavailable,
    DeviceLost,
    ModelMissing,
    ModelInvalid,
    UnknownModel,
    InvalidArgument,
    Aborted,
    /// The call's work meter ([`crate::Cancel::with_budget`]) would pass the call's budget.
    BudgetExceeded,
    Internal,
}

impl Code {
    pub const ALL: [Code; 13] = [
        Code::UnsupportedFormat,
        Code::ImageTooLarge,
        Code::DecodeFailed,
        Code::EncodeFailed,
        Code::GpuUnavailable,
        Code::DeviceLost,
        Code::ModelMissing,
        Code::ModelInvalid,
        Code::UnknownModel,
        Code::InvalidArgument,
        Code::Aborted,
        Code::BudgetExceeded,
        Code::Internal,
    ];

    /// Stable string form, shared with JavaScript (native/node/index.d.ts `EngineErrorCode`).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::UnsupportedFormat => "unsupported_format",
            Code::ImageTooLarge => "image_too_large",
            Code::DecodeFailed => "decode_failed",
            Code::EncodeFailed => "encode_failed",
            Code::GpuUnavailable => "gpu_unavailable",
            Code::DeviceLost => "device_lost",
            Code::ModelMissing => "model_missing",
            Code::ModelInvalid => "model_invalid",
            Code::UnknownModel => "unknown_model",
            Code::InvalidArgument => "invalid_argument",
            Code::Aborted => "aborted",
            Code::BudgetExceeded => "budget_exceeded",
            Code::Internal => "internal",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Error {
    pub code: Code,
    pub message: String,
}

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error { code, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand: `bail!(Code::ModelInvalid, "layer {} ...", x)`.
#[macro_export]
macro_rules! bail {
    ($code:expr, $($arg:tt)*) => {
        return Err($crate::error::Error::new($code, format!($($arg)*)))
    };
}
