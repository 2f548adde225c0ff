package cli

// RuleTags are the settings tags rule puts in words; TestEveryTagIsDescribed fails on a
// settings field with another, so that a constraint added there does not go missing from the
// help. Add a tag here once rule describes it.
var RuleTags = map[string]bool{
	"json": true, "env": true, "default": true,
	"min": true, "max": true, "below": true, "enum": true, "pattern": true, "format": true,
}
