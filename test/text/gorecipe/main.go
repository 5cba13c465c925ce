// docs/text-ids.md's Go recipe, with Debian's Go and lib/pq: a struct whose
// int64 key is tagged ",string" sends it as a JSON string that a browser
// keeps and reads it back; without the tag the key is a JSON number, which
// a browser (here: a float64, as JSON.parse) rounds; the text form from
// the server finds its row through the reader, also in upper case or with
// O for 0, and a string that is no ID is an error of SQLSTATE class 22,
// which the recipe answers as not found.  Connects with libpq's variables
// (test/text/run.sh sets them).  Prints TAP: "ok N - name", "# pass N",
// "# fail N".
package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lib/pq"
)

type Order struct {
	ID       int64  `json:"id,string"`
	PublicID string `json:"public_id"` // snowflake.snowflake_base32(id, 'order')
	Item     string `json:"item"`
}

type OrderAsNumber struct {
	ID   int64  `json:"id"`
	Item string `json:"item"`
}

var n, pass, fail int

// itemByPublicID is the recipe's lookup: the row of a public ID in any form
// the reader takes; a string that is no ID (SQLSTATE class 22) is not found.
func itemByPublicID(db *sql.DB, publicID string) (string, error) {
	var item string
	err := db.QueryRow(`SELECT item FROM orders WHERE id = snowflake.snowflake_from_base32($1, 'order')`, publicID).Scan(&item)
	if e, ok := err.(*pq.Error); ok && e.Code.Class() == "22" {
		err = sql.ErrNoRows
	}
	return item, err
}

func check(name string, ok bool, detail string) {
	n++
	if ok {
		pass++
		fmt.Printf("ok %d - %s\n", n, name)
	} else {
		fail++
		fmt.Printf("not ok %d - %s\n# %s\n", n, name, detail)
	}
}

func main() {
	db, err := sql.Open("postgres", "sslmode=disable")
	if err != nil {
		panic(err)
	}
	if _, err := db.Exec(`CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), item text);
		INSERT INTO orders (item) VALUES ('book'), ('pen'), ('ink')`); err != nil {
		panic(err)
	}
	rows, err := db.Query(`SELECT id, snowflake.snowflake_base32(id, 'order'), item FROM orders ORDER BY id`)
	if err != nil {
		panic(err)
	}
	var orders []Order
	for rows.Next() {
		var o Order
		if err := rows.Scan(&o.ID, &o.PublicID, &o.Item); err != nil {
			panic(err)
		}
		orders = append(orders, o)
	}

	sent, _ := json.Marshal(orders)
	// what a browser's JSON.parse sees: strings stay strings
	var seen []map[string]interface{}
	json.Unmarshal(sent, &seen)
	exact := true
	for i, o := range orders {
		s, isString := seen[i]["id"].(string)
		exact = exact && isString && s == fmt.Sprint(o.ID)
	}
	check("with \",string\" the key is a JSON string, exact", exact, string(sent))

	var back []Order
	err = json.Unmarshal(sent, &back)
	check("and reads back from it", err == nil && len(back) == 3 && back[0] == orders[0], fmt.Sprint(err, back))

	found := 0
	for _, o := range back {
		variant := "order_" + strings.ReplaceAll(strings.ToUpper(strings.TrimPrefix(o.PublicID, "order_")), "0", "O")
		item, err := itemByPublicID(db, o.PublicID)
		item2, err2 := itemByPublicID(db, variant)
		if err == nil && item == o.Item && err2 == nil && item2 == o.Item {
			found++
		}
	}
	check("the text form finds its row, also in upper case and with O for 0", found == 3, fmt.Sprint(found))

	notFound := 0
	for _, s := range []string{"order_0000-0000-0001", "order_8000000000000", "user_14y6vtn380w0s", "nonsense"} {
		if _, err := itemByPublicID(db, s); err == sql.ErrNoRows {
			notFound++
		}
	}
	check("a string that is no ID is not found", notFound == 4, fmt.Sprint(notFound))

	plain, _ := json.Marshal([]OrderAsNumber{{orders[0].ID, orders[0].Item}, {orders[1].ID, orders[1].Item}, {orders[2].ID, orders[2].Item}})
	var asNumbers []map[string]interface{}
	json.Unmarshal(plain, &asNumbers)
	rounded := false
	for i, o := range orders {
		f, isNumber := asNumbers[i]["id"].(float64)
		rounded = rounded || (isNumber && int64(f) != o.ID)
	}
	check("without it the key is a JSON number, which a browser rounds", rounded && !strings.Contains(string(plain), "\"id\":\""), string(plain))

	fmt.Printf("1..%d\n# pass %d\n# fail %d\n", n, pass, fail)
}
