// Written by hand in the shape `authoric typegen --app acme --lang ts` writes.
export interface InvoicesRow {
  uid: string;
  number: string;
  vendor_uid: string | null;
  amount: string | null;
  status: "draft" | "paid" | null;
  lines: number | null;
  approved: boolean | null;
  meta: unknown;
  createdAt: string;
  updatedAt: string;
}

export interface VendorsRow {
  uid: string;
  name: string;
  country_uid: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface AcmeTables {
  invoices: InvoicesRow;
  vendors: VendorsRow;
}
