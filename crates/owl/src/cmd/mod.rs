pub mod compare;
pub mod demo;
pub mod estimate;
pub mod record;
pub mod simulate;
