pub mod compare;
pub mod demo;
pub mod perflow;
pub mod simulate;
