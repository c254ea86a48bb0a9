fn a() {}
fn b() { a() }
