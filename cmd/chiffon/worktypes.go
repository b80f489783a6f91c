package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/worktype"
	"github.com/spf13/cobra"
)

// newWorkTypesCmd is `chiffon worktypes [TYPE[/WORK_TYPE]]`, the catalogue of
// work types the agents offer.
func newWorkTypesCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "worktypes [TYPE[/WORK_TYPE]]",
		Short: "List the work types the agents offer; with TYPE/WORK_TYPE, describe one and its parameters",
		Long: `Lists the work types the agents offer, as their registrations describe them: agent
type, name, approval, the agents offering it and the first line of its description.
TYPE lists those of one agent type.

TYPE/WORK_TYPE describes one: its description, each parameter (name, type, whether it
is required, the allowed values, the default, its description), whether a task of it
waits for an operator's approval and which agents ask for it, the agents offering it,
those that sent no catalogue (they check parameters themselves), and the variants
when the agents declare different specs (a task must satisfy each).

submit --param k=v reads each value as the type shown here.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var to, name string
			if len(args) == 1 {
				to, name, _ = strings.Cut(args[0], "/")
				if to == "" || strings.Contains(args[0], "/") && name == "" {
					return usagef(fmt.Sprintf("%q: want TYPE or TYPE/WORK_TYPE", args[0]))
				}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			list, served, err := fetchWorkTypes(cmd.Context(), c)
			if err != nil {
				return err
			}
			if !served {
				return errors.New("the orchestrator serves no work-type catalogue (HTTP 404): it is older than this CLI; chiffon agents lists the work types each agent offers")
			}
			if name != "" {
				return showWorkType(cmd.OutOrStdout(), list, to, name, cf.jsonOut)
			}
			if to != "" {
				if list = ofAgentType(list, to); len(list) == 0 {
					return fmt.Errorf("no agent of type %q offers a work type", to)
				}
			}
			if cf.jsonOut {
				return printJSON(cmd.OutOrStdout(), list)
			}
			return printWorkTypeTable(cmd.OutOrStdout(), list)
		},
	}
	cf.add(cmd)
	return cmd
}

// ofAgentType is the work types of list offered by agents of type to.
func ofAgentType(list []api.WorkType, to string) []api.WorkType {
	return slices.DeleteFunc(slices.Clone(list), func(wt api.WorkType) bool { return string(wt.AgentType) != to })
}

// showWorkType describes work type to/name of list, or says which the agents of
// type to offer instead.
func showWorkType(w io.Writer, list []api.WorkType, to, name string, jsonOut bool) error {
	wt := findWorkType(list, to, name)
	if wt == nil {
		var names []string
		for _, o := range ofAgentType(list, to) {
			names = append(names, o.Name)
		}
		if len(names) == 0 {
			return fmt.Errorf("no work type %s: no agent of type %q offers any", taskview.WorkText(to, name), to)
		}
		return fmt.Errorf("no work type %s: agents of type %s offer %s", taskview.WorkText(to, name), to, strings.Join(names, ", "))
	}
	if jsonOut {
		return printJSON(w, wt)
	}
	return printWorkType(w, wt)
}

// printWorkTypeTable is the table of `chiffon worktypes`.
func printWorkTypeTable(w io.Writer, list []api.WorkType) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tNAME\tAPPROVAL\tAGENTS\tDESCRIPTION")
	for _, wt := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", wt.AgentType, taskview.Printable(wt.Name), approvalCell(wt),
			dash(compactList(wt.Agents, 30)), dash(taskview.FitColumns(firstLine(wt.Description), 60)))
	}
	return tw.Flush()
}

// approvalCell is a work type's approval in a table: required, by the agents
// that ask for it, or "-".
func approvalCell(wt api.WorkType) string {
	switch {
	case wt.Approval == worktype.ApprovalRequired:
		return "required"
	case len(wt.ApprovalAgents) > 0:
		return "by " + compactList(wt.ApprovalAgents, 20)
	}
	return "-"
}

// printWorkType describes one work type: its header rows, its parameters, its
// variants.
func printWorkType(w io.Writer, wt *api.WorkType) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Work type", taskview.Printable(taskview.WorkText(wt.AgentType, wt.Name)))
	descriptionRows(tw, "Description", wt.Description)
	row("Approval", workTypeApproval(*wt))
	row("Agents", dash(strings.Join(wt.Agents, ", ")))
	if len(wt.Undeclared) > 0 {
		row("Undeclared", strings.Join(wt.Undeclared, ", ")+" (sent no catalogue: they check the parameters themselves)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printParameters(w, "Parameters", wt.Parameters); err != nil {
		return err
	}
	if len(wt.Variants) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nVariants (the agents declare different specs; a task must satisfy each):")
	for _, v := range wt.Variants {
		fmt.Fprintf(w, "\n  Declared by %s:\n", strings.Join(v.Agents, ", "))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		descriptionRows(tw, "    Description", v.Description)
		fmt.Fprintf(tw, "    Approval:\t%s\n", dash(v.Approval))
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := printParameters(w, "    Parameters", v.Parameters); err != nil {
			return err
		}
	}
	return nil
}

// descriptionRows writes description's lines as the rows of key, "-" when empty.
func descriptionRows(tw io.Writer, key, description string) {
	lines := strings.Split(strings.TrimSpace(description), "\n")
	fmt.Fprintf(tw, "%s:\t%s\n", key, dash(taskview.Printable(lines[0])))
	for _, l := range lines[1:] {
		fmt.Fprintf(tw, "\t%s\n", taskview.Printable(l))
	}
}

// workTypeApproval says whether a task of wt waits for an operator's yes.
func workTypeApproval(wt api.WorkType) string {
	switch {
	case wt.Approval == worktype.ApprovalRequired:
		return "required: every task waits for an operator's yes (chiffon approve)"
	case len(wt.ApprovalAgents) > 0:
		return "asked by " + strings.Join(wt.ApprovalAgents, ", ") +
			": a task pinned to one (--hint agent_id) waits for an operator's yes; an unpinned one is not sent to them"
	}
	return "not needed"
}

// printParameters is the table of a schema's top-level parameters, under title.
func printParameters(w io.Writer, title string, schema map[string]any) error {
	indent := strings.Repeat(" ", len(title)-len(strings.TrimLeft(title, " ")))
	if schema == nil {
		_, err := fmt.Fprintf(w, "\n%s: not declared: the agents take any and check them themselves\n", title)
		return err
	}
	fields := worktype.Fields(schema)
	others := "other names allowed"
	if schema["additionalProperties"] == false {
		others = "other names refused"
	}
	if len(fields) == 0 {
		_, err := fmt.Fprintf(w, "\n%s: none (%s)\n", title, others)
		return err
	}
	fmt.Fprintf(w, "\n%s (%s):\n", title, others)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s  NAME\tTYPE\tREQUIRED\tVALUES\tDEFAULT\tDESCRIPTION\n", indent)
	for _, f := range fields {
		def := ""
		if f.Default != nil {
			def = taskview.CompactJSON(f.Default)
		}
		fmt.Fprintf(tw, "%s  %s\t%s\t%s\t%s\t%s\t%s\n", indent, taskview.Printable(f.Name), fieldType(f), taskview.YesNo(f.Required),
			dash(taskview.Printable(worktype.Enumerate(f.Enum))), dash(taskview.Printable(def)), dash(taskview.Printable(f.Description)))
	}
	return tw.Flush()
}

// fieldType is a field's type as a table shows it: "integer", "array of
// string", "any" when the schema does not say.
func fieldType(f worktype.Field) string {
	switch {
	case f.Type == "":
		return "any"
	case f.Type == "array" && f.Items != "":
		return "array of " + f.Items
	}
	return f.Type
}

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// compactList joins items with commas in at most about width characters: the
// items that fit, then "+N" for the others ("echo,sleep +3").
func compactList(items []string, width int) string {
	all := strings.Join(items, ",")
	if len(all) <= width {
		return all
	}
	n := 1
	for n < len(items) && len(strings.Join(items[:n+1], ","))+len(fmt.Sprintf(" +%d", len(items)-n-1)) <= width {
		n++
	}
	return fmt.Sprintf("%s +%d", strings.Join(items[:n], ","), len(items)-n)
}
