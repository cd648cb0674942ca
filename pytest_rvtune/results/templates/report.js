(function () {
  "use strict";
  function sortTable(table, key, dir) {
    var heads = table.tHead.rows[0].cells, index = -1;
    for (var i = 0; i < heads.length; i++) {
      if (heads[i].getAttribute("data-key") === key) index = i;
    }
    if (index < 0) return false;
    var numeric = heads[index].getAttribute("data-type") === "num";
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].getAttribute("data-v"), y = b.cells[index].getAttribute("data-v");
      if (x === "" || y === "") return x === y ? 0 : (x === "" ? 1 : -1);  // blanks last either way
      var c = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y, undefined, {numeric: true});
      return dir === "desc" ? -c : c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    for (var j = 0; j < heads.length; j++) heads[j].removeAttribute("aria-sort");
    heads[index].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    table.setAttribute("data-sorted-by", key + ":" + dir);
    return true;
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      function toggle() {
        sortTable(table, th.getAttribute("data-key"),
                  th.getAttribute("aria-sort") === "ascending" ? "desc" : "asc");
      }
      th.addEventListener("click", toggle);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); }
      });
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll("tr[data-group]"), function (row) {
    row.addEventListener("click", function () { location.hash = row.getAttribute("data-group"); });
  });
  // #sort=TABLE:COLUMN[:asc|desc] sorts one table on load: a link to a sorted view (and the page test's hook)
  var match = /^#sort=([^:]+):(.+?)(?::(asc|desc))?$/.exec(decodeURIComponent(location.hash));
  if (match) {
    var table = document.getElementById(match[1]);
    if (table) sortTable(table, match[2], match[3] || "asc");
  }
  document.body.setAttribute("data-ready", "1");
})();
