pub mod agreed;
pub mod compare;
pub mod demo;
pub mod estimate;
pub mod perflow;
pub mod perpacket;
pub mod record;
pub mod simulate;
