package quotausage

// Count is one recount of the cluster, for tests that check it without a manager.
var Count = count
