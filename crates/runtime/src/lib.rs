//! The master/worker epoch loop.
//!
//! This crate will hold the loop that composes the other crates: the master draws the next
//! assignment, plans, verifies, encodes and sends packets, then collects updates before a
//! deadline; each worker decodes, updates its cache, trains and replies. It is generic over the
//! planner, transport, learner and straggler model, and times every phase. Not built yet: see
//! the epoch-loop issue.
