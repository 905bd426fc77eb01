pub mod compare;
pub mod demo;
pub mod simulate;
