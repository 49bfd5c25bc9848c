package registrar

// DriverChecks exposes how often the driver wait woke up, so a test can tell
// an event-driven wait from a polling one.
func (r *Registrar) DriverChecks() int64 { return r.driverChecks.Load() }
