package claim

// LeaseStore is what a lease backend on a shared store is (the PostgreSQL,
// SQLite and Redis backends): a Leaser that also decides batches, prunes
// and records notes. Each asserts it at compile time.
type LeaseStore interface {
	Leaser
	Batcher
	Pruner
	Recorder
}
