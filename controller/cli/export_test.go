package cli

// RuleFields are the fields of settings.Rule that rule puts in words; TestEveryRuleFieldIsDescribed
// fails on another, so that a constraint added to the rule does not go missing from the help.
// Add a field here once rule describes it.
var RuleFields = map[string]bool{
	"Kind": true, "Min": true, "Max": true, "Enum": true, "Pattern": true, "URL": true,
	"Below": true, "BelowText": true, "NoFallback": true,
}
