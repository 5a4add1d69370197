package rabbitclaim

// SetHooks installs test hooks on b; call it before b's first claim.
// declared sees every gate a claim or a preparation declared; beforePublish runs between a
// gate's declare and the publish of the claim.
func SetHooks(b *Backend, declared, beforePublish func(queue string)) {
	b.hooks = hooks{declared: declared, beforePublish: beforePublish}
}
