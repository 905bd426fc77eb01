pub mod agreed;
pub mod compare;
pub mod demo;
pub mod estimate;
pub mod keygen;
pub mod perflow;
pub mod record;
pub mod simulate;
