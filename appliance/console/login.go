package console

import (
	"context"
	"errors"
	"fmt"

	"github.com/rivo/tview"
)

// showLogin asks for the API's URL and admin token, checks them with one
// call, saves them to path and hands the client to onOK. Quit stops the
// application with an error for the caller.
func showLogin(ctx context.Context, app *tview.Application, cfg ClientConfig, path string, onOK func(*Client), onQuit func(error)) {
	form := tview.NewForm()
	status := tview.NewTextView().SetDynamicColors(true).
		SetText(fmt.Sprintf(" Asked once; kept in %s (mode 0600), which the CLI reads too.", esc(path)))
	form.AddInputField("API URL", cfg.URL, 48, nil, nil).
		AddPasswordField("Admin token", cfg.Token, 48, '*', nil).
		AddInputField("Cluster CA file (https)", cfg.CAFile, 48, nil, nil)
	busy := false
	form.AddButton("Connect", func() {
		if busy {
			return
		}
		c := ClientConfig{
			URL:    form.GetFormItemByLabel("API URL").(*tview.InputField).GetText(),
			Token:  form.GetFormItemByLabel("Admin token").(*tview.InputField).GetText(),
			CAFile: form.GetFormItemByLabel("Cluster CA file (https)").(*tview.InputField).GetText(),
		}
		cl, err := NewClient(c.URL, c.Token, c.CAFile)
		if err != nil {
			status.SetText(" [red]" + esc(err.Error()) + "[-]")
			return
		}
		busy = true
		status.SetText(" connecting to " + esc(cl.URL()) + "…")
		go func() {
			_, err := cl.Machines(ctx, 0, 0)
			if err == nil {
				err = SaveClientConfig(path, c)
			}
			app.QueueUpdateDraw(func() {
				busy = false
				switch {
				case Unauthorized(err):
					status.SetText(" [red]the API refused this token: " + esc(err.Error()) + "[-]")
				case err != nil:
					status.SetText(" [red]" + esc(err.Error()) + "[-]")
				default:
					onOK(cl)
				}
			})
		}()
	})
	form.AddButton("Quit", func() {
		onQuit(errors.New("console: no API URL and token given"))
		app.Stop()
	})
	form.SetCancelFunc(func() {
		onQuit(errors.New("console: no API URL and token given"))
		app.Stop()
	})
	form.SetBorder(true).SetTitle(" Rollcall: connect to a cluster ")
	page := tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(form, 11, 0, true).
		AddItem(status, 2, 0, false)
	app.SetRoot(center(page, 78, 13), true).SetFocus(form)
}
